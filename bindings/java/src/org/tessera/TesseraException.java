package org.tessera;

/** An error of the engine; the message names the file, key, flag or device at fault. */
public class TesseraException extends RuntimeException {
    public TesseraException(String message) {
        super(message);
    }
}
