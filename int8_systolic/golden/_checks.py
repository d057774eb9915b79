"""Argument checks shared by the golden model.

Every public function validates its inputs up front so that bad input yields a
``ValueError`` naming the parameter and the allowed range, never a silent wrong
answer or a traceback from deep inside numpy.
"""

import math

import numpy as np

INT8_MIN, INT8_MAX = -128, 127
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

ACTIVATIONS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")
PADDINGS = ("SAME", "VALID")
ROUNDINGS = ("double", "single")


def int_array(name, value, dtype, *, ndim=None, lo=None, hi=None):
    """Return ``value`` as an ndarray of integer ``dtype``, checking dtype, rank and range.

    Integer arrays of a wider type are accepted when every element fits; floats,
    bools and objects are refused (a float activation is almost always a forgotten
    quantization step).
    """
    arr = np.asarray(value)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{name} must be an integer array ({np.dtype(dtype).name}), got dtype {arr.dtype}")
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {arr.shape}")
    info = np.iinfo(dtype)
    lo = info.min if lo is None else lo
    hi = info.max if hi is None else hi
    if arr.size:
        amin, amax = int(arr.min()), int(arr.max())
        if amin < lo or amax > hi:
            bad = amin if amin < lo else amax
            raise ValueError(f"{name} values must be in [{lo}, {hi}], found {bad}")
    return arr.astype(dtype, copy=False)


def int_param(name, value, lo, hi):
    """A scalar integer parameter in [lo, hi]."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {value!r}")
    value = int(value)
    if not lo <= value <= hi:
        raise ValueError(f"{name} must be in [{lo}, {hi}], got {value}")
    return value


def int_or_array_param(name, value, lo, hi, n=None):
    """An integer scalar, or (when ``n`` is given) a length-``n`` integer vector, in [lo, hi].

    Returns an int64 array of shape () or (n,).
    """
    arr = np.asarray(value)
    if arr.ndim == 0:
        return np.int64(int_param(name, value.item() if isinstance(value, np.ndarray) else value, lo, hi))
    if n is None:
        raise ValueError(f"{name} must be a scalar integer, got an array of shape {arr.shape}")
    if arr.shape != (n,):
        raise ValueError(f"{name} must be a scalar or have shape ({n},) (one per output channel), got {arr.shape}")
    return int_array(name, arr, np.int64, lo=lo, hi=hi)


def scale_param(name, value, n=None):
    """A positive, finite float32 scale; with ``n``, also a length-``n`` vector (one per channel).

    TFLite stores scales as float32, so the value is rounded to float32 first; a value
    that becomes 0 or infinite in float32 is refused. Returns a float32 array of shape
    () or (n,).
    """
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}") from None
    if arr.ndim != 0 and (n is None or arr.shape != (n,)):
        expected = "a scalar" if n is None else f"a scalar or shape ({n},) (one per output channel)"
        raise ValueError(f"{name} must be {expected}, got shape {arr.shape}")
    with np.errstate(over="ignore"):
        f32 = arr.astype(np.float32)
    if not (np.all(np.isfinite(f32)) and np.all(f32 > 0)):
        raise ValueError(f"{name} must be positive and finite as a float32, got {value!r}")
    return f32


def zero_point_param(name, value, lo=INT8_MIN, hi=INT8_MAX):
    return int_param(name, value, lo, hi)


def choice(name, value, allowed):
    if not isinstance(value, str) or value.upper() not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
    return value.upper()


def rounding_param(value):
    if value not in ROUNDINGS:
        raise ValueError(f"rounding must be 'double' (TFLite reference) or 'single' "
                         f"(TFLITE_SINGLE_ROUNDING), got {value!r}")
    return value


def pair_param(name, value, lo=1):
    """A (height, width) pair of integers >= lo; a single int means both."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        value = (value, value)
    try:
        h, w = value
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an int or a (height, width) pair of ints >= {lo}, "
                         f"got {value!r}") from None
    return (int_param(f"{name}[0]", h, lo, INT32_MAX), int_param(f"{name}[1]", w, lo, INT32_MAX))


def bias_param(bias, n):
    """int32 bias of shape (n,), or None."""
    if bias is None:
        return None
    arr = np.asarray(bias)
    if arr.dtype != np.int32:
        raise ValueError(f"bias must be an int32 array of shape ({n},) (scale input_scale*weight_scale, "
                         f"zero point 0), got dtype {arr.dtype}")
    if arr.shape != (n,):
        raise ValueError(f"bias must have shape ({n},) (one per output channel), got {arr.shape}")
    return arr


def finite_real(name, value):
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a finite real number, got {value!r}") from None
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return v
