package org.tessera;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * The parameter, return value or field may be null. Everything in
 * org.tessera not marked so is non-null: passing null there is a
 * {@link NullPointerException} naming the parameter.
 *
 * <p>Kotlin maps Java types to nullable ones only for annotations it knows
 * by fully qualified name (org.jetbrains.annotations, androidx.annotation,
 * javax.annotation, org.jspecify.annotations, ...); this one is not among
 * them, so from Kotlin these types stay platform types. See README.md.
 */
@Documented
@Retention(RetentionPolicy.CLASS)
@Target({ElementType.METHOD, ElementType.PARAMETER, ElementType.FIELD})
public @interface Nullable {
}
