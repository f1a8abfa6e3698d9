"""Argument checks in the Python API's own words: each error names the
parameter as Python spells it and what it accepts (TypeError for a wrong
kind of value, ValueError for a value out of range), before anything
reaches the engine."""
import numbers
import os


def _show(value):
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def integer(name, value, lo=None, hi=None, none_ok=False, what=None):
    """An int (not a bool, not a float) within [lo, hi]."""
    if value is None and none_ok:
        return None
    want = what or _range_words(lo, hi, "int") + (" or None" if none_ok else "")
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be {want}, not {_show(value)}")
    value = int(value)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise ValueError(f"{name} must be {want}, not {value}")
    return value


def real(name, value, lo=None, hi=None, what=None):
    """A real number (int or float, not a bool, not NaN) within [lo, hi]."""
    want = what or _range_words(lo, hi, "number")
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be {want}, not {_show(value)}")
    value = float(value)
    if value != value or (lo is not None and value < lo) or (hi is not None and value > hi):
        raise ValueError(f"{name} must be {want}, not {value}")
    return value


def _range_words(lo, hi, kind):
    if lo is not None and hi is not None:
        return f"a{'n' if kind == 'int' else ''} {kind} from {lo} to {hi}"
    if lo == 0:
        return f"a{'n' if kind == 'int' else ''} {kind} >= 0"
    if lo == 1 and kind == "int":
        return "a positive int"
    if lo is not None:
        return f"a{'n' if kind == 'int' else ''} {kind} >= {lo}"
    return f"a{'n' if kind == 'int' else ''} {kind}"


def flag(name, value):
    """True or False (0 and 1 pass too; any other value is a mistake)."""
    if isinstance(value, bool) or (isinstance(value, numbers.Integral) and value in (0, 1)):
        return bool(value)
    raise TypeError(f"{name} must be True or False, not {_show(value)}")


def choice(name, value, allowed):
    """One of allowed (compared with ==, so True matches True only when
    allowed holds no 1)."""
    for a in allowed:
        if type(a) is type(value) and a == value:
            return value
    words = ", ".join(repr(a) for a in allowed[:-1]) + " or " + repr(allowed[-1])
    raise ValueError(f"{name} must be {words}, not {_show(value)}")


def text(name, value, none_ok=False):
    if value is None and none_ok:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str{' or None' if none_ok else ''}, not {_show(value)}")
    return value


def path(name, value):
    """A file path: str, bytes or os.PathLike, as a str."""
    if isinstance(value, (str, bytes)) or hasattr(value, "__fspath__"):
        p = os.fspath(value)
        return os.fsdecode(p) if isinstance(p, bytes) else p
    raise TypeError(f"{name} must be a path (str or os.PathLike), not {_show(value)}")


def tokens(name, value, n_vocab):
    """A sequence of token ids, each in 0 .. n_vocab-1, as a list of int."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise TypeError(f"{name} must be a list of token ids (ints), not {_show(value)}")
    out = []
    for i, t in enumerate(value):
        if isinstance(t, bool) or not isinstance(t, numbers.Integral):
            raise TypeError(f"{name}[{i}] must be a token id (an int), not {_show(t)}")
        if not 0 <= t < n_vocab:
            raise ValueError(f"{name}[{i}] is {t}: token ids run from 0 to {n_vocab - 1}")
        out.append(int(t))
    return out


def keywords(where, given, allowed):
    """Reject keywords a function does not take, listing those it does."""
    unknown = [k for k in given if k not in allowed]
    if unknown:
        raise TypeError(f"{where} got an unexpected keyword argument '{unknown[0]}'; "
                        f"it takes {', '.join(allowed)}")
