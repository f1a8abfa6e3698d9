package org.tessera;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Never null (the default in org.tessera, marked where it helps the
 * reader): a null argument is a {@link NullPointerException} naming the
 * parameter, and a return value is never null. See {@link Nullable} about
 * Kotlin.
 */
@Documented
@Retention(RetentionPolicy.CLASS)
@Target({ElementType.METHOD, ElementType.PARAMETER, ElementType.FIELD})
public @interface NonNull {
}
