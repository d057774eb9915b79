"""Single-op int8 models for every op of the golden model's table, with inputs, to run against TFLM.

``cases(op, rng, n)`` returns about ``n`` random :class:`Case` objects plus the op's
adversarial ones (zero points -128 and 127, inputs at -128/127, multipliers below 2**-20 and
above 1, exact rounding ties, every option, the largest ranks TFLM accepts). Output shapes
are computed here independently of the golden model (numpy on placeholder arrays), since a
.tflite file must declare them. ``runtime`` says which runtime is the reference: TFLM,
except SPACE_TO_BATCH_ND whose int8 padding TFLM leaves uninitialised (LiteRT's
BUILTIN_REF pads with the zero point; see docs/runtimes.md).
"""

import dataclasses

import numpy as np

from int8_systolic.golden.tflite.builder import TensorSpec, op_options, single_op_model

I8 = np.int8


@dataclasses.dataclass
class Case:
    op: str
    tag: str
    model: bytes
    inputs: list
    runtime: str = "tflm"


def scale(rng, lo=1e-4, hi=2.0):
    return float(np.float32(np.exp(rng.uniform(np.log(lo), np.log(hi)))))


def zp(rng):
    return int(rng.choice([-128, 127, 0, int(rng.integers(-128, 128))], p=[0.15, 0.15, 0.1, 0.6]))


def int8_data(rng, shape, lo=-128, hi=127):
    x = rng.integers(lo, hi + 1, shape).astype(I8)
    flat = x.reshape(-1)
    if flat.size >= 2:  # the extremes in every tensor
        flat[0], flat[-1] = lo, hi
    return x


def random_shape(rng, rank, lo=1, hi=6):
    return tuple(int(d) for d in rng.integers(lo, hi + 1, rank))


def broadcast_pair(rng, rank):
    out = random_shape(rng, rank, 1, 4)
    a = tuple(d if rng.random() < 0.7 else 1 for d in out)
    b = tuple(d if rng.random() < 0.7 else 1 for d in out)
    b = b[int(rng.integers(0, rank)):] if rng.random() < 0.3 else b   # lower rank broadcasts too
    return a, b, tuple(np.broadcast_shapes(a, b))


def act(rng):
    return int(rng.choice([0, 1, 2, 3]))  # NONE, RELU, RELU_N1_TO_1, RELU6


def model(op, ins, outs, options=None, version=1):
    return single_op_model(op, ins, outs, options, version)


def _var_inputs(specs, rng, arrays=None):
    """Random int8 data for each non-constant input spec (or the given arrays)."""
    out = []
    for i, t in enumerate(specs):
        if t is None or t.data is not None:
            continue
        if arrays is not None and i in arrays:
            out.append(arrays[i])
        elif t.dtype == np.int8:
            out.append(int8_data(rng, t.shape))
        elif t.dtype == np.int32:
            out.append(rng.integers(-1000, 1000, t.shape).astype(np.int32))
        elif t.dtype == np.float32:
            out.append(rng.normal(0, 3, t.shape).astype(np.float32))
        else:
            raise ValueError(t)
    return out


def case(op, tag, ins, outs, rng, options=None, arrays=None, runtime="tflm", version=1):
    return Case(op, tag, model(op, ins, outs, options, version), _var_inputs(ins, rng, arrays), runtime)


# --- arithmetic -------------------------------------------------------------------------

def _add_sub(op, rng, n):
    out = []
    for i in range(n):
        rank = int(rng.integers(1, 7))
        a, b, o = broadcast_pair(rng, rank) if i % 2 else (random_shape(rng, rank, 1, 4),) * 3
        s1, s2 = scale(rng), scale(rng)
        so = max(scale(rng), 2.5 * max(s1, s2) / 2**20)
        out.append(case(op, f"rank {rank}", [TensorSpec(a, I8, s1, zp(rng)), TensorSpec(b, I8, s2, zp(rng))],
                        [TensorSpec(o, I8, so, zp(rng))], rng,
                        op_options(op.title(), fusedActivationFunction=act(rng))))
    # adversarial: equal scales (ratios exactly 1/2: ties), zero points at the ends, an output scale so small the
    # sum saturates, one so large everything rounds to the zero point, every fused activation
    for s1, s2, so, z1, z2, zo, a in [(0.5, 0.5, 0.5, -128, 127, 0, 0), (0.1, 0.05, 0.001, 127, -128, -128, 0),
                                      (0.01, 0.02, 10.0, 0, 0, 127, 0), (1 / 128, 1 / 64, 1 / 32, -1, 3, 5, 3),
                                      (0.3, 0.3, 0.6, -128, -128, -128, 1), (0.2, 0.7, 0.05, 10, -10, 0, 2)]:
        x = np.arange(-128, 128, dtype=I8).reshape(16, 16)
        out.append(case(op, "adversarial", [TensorSpec((16, 16), I8, s1, z1), TensorSpec((16, 16), I8, s2, z2)],
                        [TensorSpec((16, 16), I8, so, zo)], rng, op_options(op.title(), fusedActivationFunction=a),
                        arrays={0: x, 1: x.T.copy()}))
    return out


def _mul(rng, n):
    out = []
    for i in range(n):
        rank = int(rng.integers(1, 7))
        a, b, o = broadcast_pair(rng, rank) if i % 2 else (random_shape(rng, rank, 1, 4),) * 3
        out.append(case("MUL", f"rank {rank}", [TensorSpec(a, I8, scale(rng), zp(rng)),
                                                 TensorSpec(b, I8, scale(rng), zp(rng))],
                        [TensorSpec(o, I8, scale(rng, 1e-5, 1.0), zp(rng))], rng,
                        op_options("Mul", fusedActivationFunction=act(rng))))
    # multiplier exactly 2**-k (every odd product is a tie), tiny (< 2**-20) and > 1 multipliers
    for s1, s2, so in [(0.5, 0.5, 64.0), (0.25, 1.0, 2.0), (1e-4, 1e-4, 1.0), (0.9, 0.9, 0.01), (1.0, 1.0, 0.5)]:
        x = np.arange(-128, 128, dtype=I8).reshape(16, 16)
        out.append(case("MUL", "adversarial", [TensorSpec((16, 16), I8, s1, -128), TensorSpec((16, 16), I8, s2, 127)],
                        [TensorSpec((16, 16), I8, so, 0)], rng, arrays={0: x, 1: x.T.copy()}))
    return out


# --- activations ------------------------------------------------------------------------

ALL = np.arange(-128, 128, dtype=I8)


def _unary_all_inputs(op, rng, n, out_q, options=None, scales=None):
    out = []
    for s in list(scales or []) + [scale(rng, 1e-3, 1.0) for _ in range(n)]:
        z = zp(rng)
        q = out_q(rng) if callable(out_q) else out_q
        out.append(case(op, "all 256 inputs", [TensorSpec((256,), I8, s, z)], [TensorSpec((256,), I8, *q)], rng,
                        options(rng) if callable(options) else options, arrays={0: ALL}))
    return out


def _pools(op, rng, n):
    out = []
    for i in range(n + 4):
        b, h, w, c = 1 + i % 2, int(rng.integers(1, 9)), int(rng.integers(1, 9)), int(rng.integers(1, 5))
        fh, fw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        sh, sw = int(rng.integers(1, 3)), int(rng.integers(1, 3))
        pad = "SAME" if i % 2 or h < fh or w < fw else "VALID"
        oh = -(-h // sh) if pad == "SAME" else (h - fh) // sh + 1
        ow = -(-w // sw) if pad == "SAME" else (w - fw) // sw + 1
        s, z = scale(rng), zp(rng)
        out.append(case(op, pad, [TensorSpec((b, h, w, c), I8, s, z)], [TensorSpec((b, oh, ow, c), I8, s, z)], rng,
                        op_options("Pool2D", padding=0 if pad == "SAME" else 1, strideH=sh, strideW=sw,
                                   filterHeight=fh, filterWidth=fw, fusedActivationFunction=act(rng))))
    return out


def _softmax(op, rng, n):
    out = []
    fixed = (1 / 256, -128) if op == "SOFTMAX" else (16 / 256, 127)
    for i in range(n + 4):
        rank = int(rng.integers(1, 5))
        shape = random_shape(rng, rank, 1, 10)
        s = [scale(rng, 1e-3, 1.0), 1e-6 * 8, 0.5, 1.0, 0.0625][i % 5] if i < 5 else scale(rng, 1e-3, 1.0)
        beta = 1.0 if op == "LOG_SOFTMAX" else float(rng.choice([1.0, 0.5, 2.0, float(rng.uniform(0.1, 3))]))
        arrays = None
        if i == 1:   # every row constant: all differences 0
            arrays = {0: np.full(shape, int(rng.integers(-128, 128)), I8)}
        if i == 2:   # one element per row
            shape = (*shape[:-1], 1)
        opts = op_options("Softmax", beta=beta) if op == "SOFTMAX" else op_options("LogSoftmax")
        out.append(case(op, f"rank {rank}, beta {beta:.3g}", [TensorSpec(shape, I8, s, zp(rng))],
                        [TensorSpec(shape, I8, *fixed)], rng, opts, arrays=arrays))
    # a long row (the sum of exponentials near its Q12.19 range)
    out.append(case(op, "depth 1000", [TensorSpec((2, 1000), I8, 0.01, 0)], [TensorSpec((2, 1000), I8, *fixed)], rng,
                    op_options("Softmax", beta=1.0) if op == "SOFTMAX" else op_options("LogSoftmax")))
    return out


def _l2norm(rng, n):
    out = []
    for i in range(n + 3):
        rank = int(rng.integers(1, 5))
        shape = random_shape(rng, rank, 1, 12)
        arrays = None
        z = zp(rng)
        if i == 0:
            arrays = {0: np.full(shape, z, I8)}   # every row at the zero point: sum 0
        if i == 1:
            shape = (*shape[:-1], 1)
        out.append(case("L2_NORMALIZATION", f"rank {rank}", [TensorSpec(shape, I8, scale(rng), z)],
                        [TensorSpec(shape, I8, 1 / 128, 0)], rng, op_options("L2Norm"), arrays=arrays))
    big = np.full((1, 1024), -128, I8)   # the largest sum of squares: 1024 * 255**2
    out.append(case("L2_NORMALIZATION", "largest sum", [TensorSpec((1, 1024), I8, 0.1, 127)],
                    [TensorSpec((1, 1024), I8, 1 / 128, 0)], rng, op_options("L2Norm"), arrays={0: big}))
    return out


def _reduce(op, rng, n):
    out = []
    for _i in range(n + 4):
        rank = int(rng.integers(1, 6))
        shape = random_shape(rng, rank, 1, 6)
        k = int(rng.integers(1, rank + 1))
        axes = [int(a) for a in rng.choice(rank, k, replace=False)]
        axes = [a - rank if rng.random() < 0.4 else a for a in axes] + ([axes[0]] if rng.random() < 0.2 else [])
        keep = bool(rng.random() < 0.5)
        oshape = np.sum(np.zeros(shape), axis=tuple({a % rank for a in axes}), keepdims=keep).shape
        s_in = scale(rng)
        s_out = s_in * float(rng.choice([1.0, 0.5, 3.0, 1e-3 if op == "MEAN" else 7.0, float(rng.uniform(0.2, 5))]))
        out.append(case(op, f"rank {rank} axes {axes} keep {keep}",
                        [TensorSpec(shape, I8, s_in, zp(rng)), TensorSpec((len(axes),), np.int32,
                                                                          data=np.array(axes, np.int32))],
                        [TensorSpec(oshape, I8, s_out, zp(rng))], rng, op_options("Reducer", keepDims=keep)))
    return out


def _arg_max(rng, n):
    out = []
    for i in range(n + 2):
        rank = int(rng.integers(1, 5))
        shape = random_shape(rng, rank, 1, 7)
        axis = int(rng.integers(-rank, rank))
        oshape = np.argmax(np.zeros(shape), axis=axis).shape
        dtype = np.int32
        arrays = {0: rng.integers(-2, 2, shape).astype(I8)} if i < 3 else None   # many ties: the first wins
        out.append(case("ARG_MAX", f"axis {axis}", [TensorSpec(shape, I8, scale(rng), zp(rng)),
                                                    TensorSpec((1,), np.int32, data=np.array([axis], np.int32))],
                        [TensorSpec(oshape, dtype)], rng,
                        op_options("ArgMax", outputType=2 if dtype == np.int32 else 4), arrays=arrays))
    return out


def _resize(rng, n):
    out = []
    for i in range(n + 6):
        b, h, w, c = int(rng.integers(1, 3)), int(rng.integers(1, 7)), int(rng.integers(1, 7)), int(rng.integers(1, 4))
        oh, ow = int(rng.integers(1, 13)), int(rng.integers(1, 13))
        align, half = [(False, False), (True, False), (False, True)][i % 3]
        s, z = scale(rng), zp(rng)
        out.append(case("RESIZE_BILINEAR", f"align {align} half {half}",
                        [TensorSpec((b, h, w, c), I8, s, z), TensorSpec((2,), np.int32,
                                                                        data=np.array([oh, ow], np.int32))],
                        [TensorSpec((b, oh, ow, c), I8, s, z)], rng,
                        op_options("ResizeBilinear", alignCorners=align, halfPixelCenters=half)))
    return out


def _comparison(op, rng, n):
    out = []
    for i in range(n + 3):
        rank = int(rng.integers(1, 5))
        a, b, o = broadcast_pair(rng, rank) if i % 2 else (random_shape(rng, rank),) * 3
        s1 = scale(rng, 1e-3, 0.99)
        s2 = s1 if i % 3 == 0 else scale(rng, 1e-3, 0.99)
        z1, z2 = zp(rng), zp(rng)
        arrays = None
        if i % 3 == 0:   # same quantization: many exact equalities
            z2 = z1
            arrays = {0: rng.integers(-3, 3, a).astype(I8), 1: rng.integers(-3, 3, b).astype(I8)}
        out.append(case(op, f"rank {rank}", [TensorSpec(a, I8, s1, z1), TensorSpec(b, I8, s2, z2)],
                        [TensorSpec(o, np.bool_)], rng, arrays=arrays))
    # differently quantized inputs that are equal in real value: 0.5 * (q - 0) == 0.25 * (2q - 0) - ...
    x = np.arange(-64, 64, dtype=I8)
    out.append(case(op, "equal reals, different scales",
                    [TensorSpec((128,), I8, 0.5, 0), TensorSpec((128,), I8, 0.25, 0)],
                    [TensorSpec((128,), np.bool_)], rng, arrays={0: (x // 2).astype(I8), 1: x}))
    return out


def _min_max(op, rng, n):
    out = []
    for i in range(n + 2):
        rank = int(rng.integers(1, 6))
        a, b, o = broadcast_pair(rng, rank) if i % 2 else (random_shape(rng, rank),) * 3
        s, z = scale(rng), zp(rng)
        out.append(case(op, f"rank {rank}", [TensorSpec(a, I8, s, z), TensorSpec(b, I8, s, z)],
                        [TensorSpec(o, I8, s, z)], rng))
    return out


def _quantize(rng, n):
    out = []
    for i in range(n + 4):
        shape = random_shape(rng, int(rng.integers(1, 4)), 1, 8)
        s = [0.5, 2.0**-7, 1e-3][i] if i < 3 else scale(rng)
        z = zp(rng)
        if i < 3:   # exact ties: (k + 1/2) * scale is exactly representable for a power-of-two scale
            k = rng.integers(-140, 140, shape)
            xf = ((k + 0.5) * s).astype(np.float32)
        else:
            xf = (rng.normal(0, 1, shape) * s * 80).astype(np.float32)
        out.append(case("QUANTIZE", "float32 -> int8", [TensorSpec(shape, np.float32)],
                        [TensorSpec(shape, I8, s, z)], rng, arrays={0: xf}))
    for i in range(n // 2 + 2):
        s_in, s_out = (scale(rng), scale(rng)) if i > 1 else [(0.5, 1.0), (0.01, 0.02)][i]
        out_type = np.uint8 if i % 2 else I8
        zo = int(rng.integers(0, 256)) if out_type == np.uint8 else zp(rng)
        out.append(case("QUANTIZE", f"int8 -> {np.dtype(out_type).name}", [TensorSpec((256,), I8, s_in, zp(rng))],
                        [TensorSpec((256,), out_type, s_out, zo)], rng, arrays={0: ALL}))
    return out


def _dequantize(rng, n):
    return [case("DEQUANTIZE", "all 256 inputs", [TensorSpec((256,), I8, scale(rng, 1e-6, 100.0), zp(rng))],
                 [TensorSpec((256,), np.float32)], rng, arrays={0: ALL}) for _ in range(n + 2)]


def _hard_swish(rng, n):
    out = []
    for _ in range(n + 2):
        s_in = scale(rng, 1e-3, 0.5)
        s_out = s_in * float(rng.uniform(0.2, 2.0))
        out.append(case("HARD_SWISH", "all 256 inputs", [TensorSpec((256,), I8, s_in, zp(rng))],
                        [TensorSpec((256,), I8, s_out, zp(rng))], rng, arrays={0: ALL}))
    return out


def _relu(op, rng, n):
    out = []
    for i in range(n + 2):
        s_in = scale(rng)
        s_out = s_in if i % 2 or op == "RELU6" else scale(rng)
        z = zp(rng)
        out.append(case(op, "all 256 inputs", [TensorSpec((256,), I8, s_in, z)],
                        [TensorSpec((256,), I8, s_out, z if s_out == s_in else zp(rng))], rng, arrays={0: ALL}))
    return out


def _leaky_relu(rng, n):
    out = []
    for i in range(n + 3):
        alpha = [0.2, -0.5, 1.5][i] if i < 3 else float(rng.uniform(-1, 2))
        s_in = scale(rng)
        out.append(case("LEAKY_RELU", f"alpha {alpha:.3g}", [TensorSpec((256,), I8, s_in, zp(rng))],
                        [TensorSpec((256,), I8, s_in * float(rng.uniform(0.3, 3)), zp(rng))], rng,
                        op_options("LeakyRelu", alpha=alpha), arrays={0: ALL}))
    return out


def _prelu(rng, n):
    out = []
    for i in range(n + 2):
        shape = random_shape(rng, 4, 1, 5)
        ashape = shape[-1:] if i % 2 else tuple(d if rng.random() < 0.5 else 1 for d in shape)
        s_in = scale(rng)
        alpha = TensorSpec(ashape, I8, scale(rng, 1e-3, 0.1), zp(rng), data=int8_data(rng, ashape))
        out.append(case("PRELU", f"alpha {list(ashape)}", [TensorSpec(shape, I8, s_in, zp(rng)), alpha],
                        [TensorSpec(shape, I8, s_in * float(rng.uniform(0.3, 3)), zp(rng))], rng))
    return out


# --- data movement ----------------------------------------------------------------------

def _q(rng):
    return scale(rng), zp(rng)


def _reshape_family(op, rng, n):
    out = []
    for i in range(n + 1):
        rank = int(rng.integers(1, 6))
        shape = random_shape(rng, rank, 1, 5)
        q = _q(rng)
        if op == "RESHAPE":
            new = [*list(rng.permutation(shape))[::-1], 1]
            target = list(new)
            if i % 2:
                target[int(rng.integers(0, len(target)))] = -1
            out.append(case(op, f"{list(shape)} -> {target}",
                            [TensorSpec(shape, I8, *q), TensorSpec((len(target),), np.int32,
                                                                   data=np.array(target, np.int32))],
                            [TensorSpec(new, I8, *q)], rng, op_options("Reshape", newShape=target)))
        elif op == "SQUEEZE":
            shape = tuple(1 if rng.random() < 0.4 else d for d in shape)
            ones = [a for a, d in enumerate(shape) if d == 1]
            dims = [a - rank if rng.random() < 0.5 else a for a in ones if rng.random() < 0.6] if i % 3 else []
            oshape = np.squeeze(np.zeros(shape), axis=tuple(dims) if dims else None).shape
            out.append(case(op, f"dims {dims}", [TensorSpec(shape, I8, *q)], [TensorSpec(oshape, I8, *q)], rng,
                            op_options("Squeeze", squeezeDims=dims)))
        elif op == "EXPAND_DIMS":
            axis = int(rng.integers(-rank - 1, rank + 1))
            oshape = np.expand_dims(np.zeros(shape), axis).shape
            out.append(case(op, f"axis {axis}", [TensorSpec(shape, I8, *q),
                                                 TensorSpec((1,), np.int32, data=np.array([axis], np.int32))],
                            [TensorSpec(oshape, I8, *q)], rng))
        elif op == "SHAPE":
            out.append(case(op, f"rank {rank}", [TensorSpec(shape, I8, *q)], [TensorSpec((rank,), np.int32)], rng,
                            op_options("Shape", outType=2)))
        elif op == "TRANSPOSE":
            rank = int(rng.integers(1, 6))
            shape = random_shape(rng, rank, 1, 4)
            perm = [int(p) for p in rng.permutation(rank)]
            out.append(case(op, f"perm {perm}", [TensorSpec(shape, I8, *q),
                                                 TensorSpec((rank,), np.int32, data=np.array(perm, np.int32))],
                            [TensorSpec(np.transpose(np.zeros(shape), perm).shape, I8, *q)], rng))
    return out


def _concat_family(op, rng, n):
    out = []
    for _ in range(n + 1):
        rank = int(rng.integers(1, 6))
        shape = random_shape(rng, rank, 1, 5)
        q = _q(rng)
        axis = int(rng.integers(-rank, rank))
        if op == "CONCATENATION":
            k = int(rng.integers(1, 5))
            shapes = [tuple(int(rng.integers(1, 4)) if a == axis % rank else d for a, d in enumerate(shape))
                      for _ in range(k)]
            oshape = np.concatenate([np.zeros(s) for s in shapes], axis=axis).shape
            out.append(case(op, f"{k} inputs axis {axis}", [TensorSpec(s, I8, *q) for s in shapes],
                            [TensorSpec(oshape, I8, *q)], rng, op_options("Concatenation", axis=axis)))
        elif op == "PACK":
            k = int(rng.integers(1, 5))
            axis = int(rng.integers(-rank - 1, rank + 1))
            oshape = np.stack([np.zeros(shape)] * k, axis=axis).shape
            out.append(case(op, f"{k} inputs axis {axis}", [TensorSpec(shape, I8, *q) for _ in range(k)],
                            [TensorSpec(oshape, I8, *q)], rng, op_options("Pack", valuesCount=k, axis=axis)))
        elif op == "UNPACK":
            k = shape[axis]
            oshape = np.zeros(shape).take(0, axis=axis).shape
            out.append(case(op, f"axis {axis}", [TensorSpec(shape, I8, *q)], [TensorSpec(oshape, I8, *q)] * k, rng,
                            op_options("Unpack", num=k, axis=axis)))
        elif op == "SPLIT":
            k = int(rng.choice([d for d in range(1, 5) if shape[axis] % d == 0]))
            oshape = np.split(np.zeros(shape), k, axis=axis)[0].shape
            out.append(case(op, f"{k} parts axis {axis}",
                            [TensorSpec((), np.int32, data=np.array(axis, np.int32)), TensorSpec(shape, I8, *q)],
                            [TensorSpec(oshape, I8, *q)] * k, rng, op_options("Split", numSplits=k)))
        elif op == "SPLIT_V":
            d = shape[axis]
            cuts = sorted({int(c) for c in rng.integers(1, d, int(rng.integers(0, 3)))} if d > 1 else set())
            sizes = [int(v) for v in np.diff([0, *cuts, d])]   # TFLM has no zero-sized (dynamic) tensors
            outs = [tuple(s if a == axis % rank else x for a, x in enumerate(shape)) for s in sizes]
            spec_sizes = list(sizes)
            spec_sizes[int(rng.integers(0, len(sizes)))] = -1
            out.append(case(op, f"sizes {spec_sizes} axis {axis}",
                            [TensorSpec(shape, I8, *q),
                             TensorSpec((len(sizes),), np.int32, data=np.array(spec_sizes, np.int32)),
                             TensorSpec((), np.int32, data=np.array(axis, np.int32))],
                            [TensorSpec(s, I8, *q) for s in outs], rng, op_options("SplitV", numSplits=len(sizes))))
    return out


def python_strided_slice_shape(shape, begin, end, strides, begin_mask, end_mask, shrink):
    """The shape TF's strided slice gives, by Python's slice semantics (shrunk axes dropped)."""
    out = []
    for axis, dim in enumerate(shape):
        if shrink >> axis & 1:
            continue
        b = None if begin_mask >> axis & 1 else int(begin[axis])
        e = None if end_mask >> axis & 1 else int(end[axis])
        out.append(len(range(dim)[slice(b, e, int(strides[axis]))]))
    return tuple(out)


def strided_slice_case(rng, shape, begin, end, strides, masks, q, dtype=I8):
    bm, em, sm = masks
    oshape = python_strided_slice_shape(shape, begin, end, strides, bm, em, sm)
    arr = lambda v: TensorSpec((len(v),), np.int32, data=np.array(v, np.int32))  # noqa: E731
    return case("STRIDED_SLICE", f"begin {list(begin)} end {list(end)} strides {list(strides)} masks {bm}/{em}/{sm}",
                [TensorSpec(shape, dtype, *q), arr(begin), arr(end), arr(strides)], [TensorSpec(oshape, dtype, *q)],
                rng, op_options("StridedSlice", beginMask=bm, endMask=em, shrinkAxisMask=sm), version=4)


def shrink_in_range(shape, begin, strides, begin_mask, shrink):
    """Whether TFLM reads inside the tensor on every shrunk axis: a positive stride, and an index that is below
    the dimension once TFLite has wrapped a negative one (``begin + dim``) and clamped it to [0, dim]."""
    for axis, dim in enumerate(shape):
        if shrink >> axis & 1:
            b = 0 if begin_mask >> axis & 1 else int(begin[axis])
            if strides[axis] < 0 or b >= dim:
                return False
    return True


def _slices(op, rng, n):
    out = []
    if op == "SLICE":
        for _ in range(n + 1):
            rank = int(rng.integers(1, 6))
            shape = random_shape(rng, rank, 1, 6)
            begin = [int(rng.integers(0, d)) for d in shape]
            size = [-1 if rng.random() < 0.3 else int(rng.integers(1, d - b + 1))
                    for d, b in zip(shape, begin, strict=True)]
            oshape = tuple(d - b if s == -1 else s for d, b, s in zip(shape, begin, size, strict=True))
            q = _q(rng)
            out.append(case(op, f"begin {begin} size {size}",
                            [TensorSpec(shape, I8, *q), TensorSpec((rank,), np.int32, data=np.array(begin, np.int32)),
                             TensorSpec((rank,), np.int32, data=np.array(size, np.int32))],
                            [TensorSpec(oshape, I8, *q)], rng))
        return out
    shape = (2, 7, 3, 5)
    while len(out) < n + 1:
        q = _q(rng)
        begin = rng.integers(-6, 6, 4)
        end = rng.integers(-6, 7, 4)
        strides = rng.choice([-2, -1, 1, 2, 3], 4)
        masks = (int(rng.integers(0, 16)), int(rng.integers(0, 16)), int(rng.choice([0, 1, 4, 5])))
        if not shrink_in_range(shape, begin, strides, masks[0], masks[2]):
            continue
        if 0 in python_strided_slice_shape(shape, begin, end, strides, *masks):
            continue
        out.append(strided_slice_case(rng, shape, begin, end, strides, masks, q))
    # int32 data (as models slice their SHAPE), negative strides from the end
    out.append(strided_slice_case(rng, (2, 3, 2, 3), [0, -1, 0, 2], [2, 0, 2, 0], [1, -1, 1, -1],
                                  (1, 0, 0), _q(rng)))
    out.append(strided_slice_case(rng, (4,), [1], [2], [1], (0, 0, 1), (None, None), dtype=np.int32))
    return out


def _pad(op, rng, n):
    out = []
    for _i in range(n + 1):
        rank = int(rng.integers(1, 6))
        shape = random_shape(rng, rank, 1, 4)
        pads = rng.integers(0, 3, (rank, 2)).astype(np.int32)
        oshape = tuple(int(d + a + b) for d, (a, b) in zip(shape, pads, strict=True))
        q = _q(rng)
        ins = [TensorSpec(shape, I8, *q), TensorSpec((rank, 2), np.int32, data=pads)]
        if op == "PADV2":
            ins.append(TensorSpec((1,), I8, *q, data=np.array([int(rng.integers(-128, 128))], I8)))
        out.append(case(op, f"paddings {pads.tolist()}", ins, [TensorSpec(oshape, I8, *q)], rng))
    return out


def _gather(rng, n):
    out = []
    for i in range(n + 2):
        rank = int(rng.integers(1, 5))
        shape = random_shape(rng, rank, 1, 5)
        axis = int(rng.integers(-rank, rank))
        a = axis % rank
        batch_dims = int(rng.integers(0, a + 1)) if i % 2 else 0
        ishape = tuple(shape[:batch_dims]) + random_shape(rng, int(rng.integers(0, 3)), 1, 4)
        idx = rng.integers(0, shape[a], ishape).astype(np.int32)
        oshape = tuple(shape[:a]) + tuple(ishape[batch_dims:]) + tuple(shape[a + 1:])
        q = _q(rng)
        out.append(case("GATHER", f"axis {axis} batch_dims {batch_dims}",
                        [TensorSpec(shape, I8, *q), TensorSpec(ishape, np.int32, data=idx)],
                        [TensorSpec(oshape, I8, *q)], rng, op_options("Gather", axis=axis, batchDims=batch_dims)))
    return out


def _space(op, rng, n):
    out = []
    for _ in range(n + 1):
        q = _q(rng)
        if op == "SPACE_TO_DEPTH":
            bs = int(rng.integers(1, 4))
            b, h, w, c = int(rng.integers(1, 3)), bs * int(rng.integers(1, 4)), bs * int(rng.integers(1, 4)), \
                int(rng.integers(1, 4))
            out.append(case(op, f"block {bs}", [TensorSpec((b, h, w, c), I8, *q)],
                            [TensorSpec((b, h // bs, w // bs, c * bs * bs), I8, *q)], rng,
                            op_options("SpaceToDepth", blockSize=bs)))
            continue
        block = [int(v) for v in rng.integers(1, 4, 2)]
        pads = rng.integers(0, 3, (2, 2))
        b, c = int(rng.integers(1, 3)), int(rng.integers(1, 4))
        const = lambda v: TensorSpec(np.shape(v), np.int32, data=np.array(v, np.int32))  # noqa: E731
        if op == "SPACE_TO_BATCH_ND":
            hw = [int(rng.integers(1, 5)) for _ in range(2)]
            padded = [d + a + e for d, (a, e) in zip(hw, pads, strict=True)]
            pads[:, 1] += [(-p) % s for p, s in zip(padded, block, strict=True)]
            padded = [d + a + e for d, (a, e) in zip(hw, pads, strict=True)]
            oshape = (b * block[0] * block[1], padded[0] // block[0], padded[1] // block[1], c)
            out.append(case(op, f"block {block} paddings {pads.tolist()}",
                            [TensorSpec((b, *hw, c), I8, *q), const(block), const(pads)], [TensorSpec(oshape, I8, *q)],
                            rng, runtime="litert", version=2))
        else:
            hw = [int(rng.integers(1, 4)) for _ in range(2)]
            full = [d * s for d, s in zip(hw, block, strict=True)]
            crops = np.array([[int(rng.integers(0, f // 2 + 1)), 0] for f in full])
            crops[:, 1] = [int(rng.integers(0, f - a)) for f, a in zip(full, crops[:, 0], strict=True)]
            oshape = (b, full[0] - crops[0].sum(), full[1] - crops[1].sum(), c)
            out.append(case(op, f"block {block} crops {crops.tolist()}",
                            [TensorSpec((b * block[0] * block[1], *hw, c), I8, *q), const(block), const(crops)],
                            [TensorSpec(oshape, I8, *q)], rng))
    return out


# --- the table --------------------------------------------------------------------------

def _tanh_like(op, fixed):
    scales = [2.0**-4, 1.0, 1e-3, 0.09474028]
    return lambda rng, n: _unary_all_inputs(op, rng, n, fixed, scales=scales)


GENERATORS = {
    "ADD": lambda rng, n: _add_sub("ADD", rng, n),
    "SUB": lambda rng, n: _add_sub("SUB", rng, n),
    "MUL": _mul,
    "AVERAGE_POOL_2D": lambda rng, n: _pools("AVERAGE_POOL_2D", rng, n),
    "MAX_POOL_2D": lambda rng, n: _pools("MAX_POOL_2D", rng, n),
    "LOGISTIC": _tanh_like("LOGISTIC", (1 / 256, -128)),
    "TANH": _tanh_like("TANH", (1 / 128, 0)),
    "SOFTMAX": lambda rng, n: _softmax("SOFTMAX", rng, n),
    "LOG_SOFTMAX": lambda rng, n: _softmax("LOG_SOFTMAX", rng, n),
    "L2_NORMALIZATION": _l2norm,
    "MEAN": lambda rng, n: _reduce("MEAN", rng, n),
    "SUM": lambda rng, n: _reduce("SUM", rng, n),
    "ARG_MAX": _arg_max,
    "RESIZE_BILINEAR": _resize,
    **{op: (lambda rng, n, op=op: _comparison(op, rng, n))
       for op in ("LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL")},
    "MAXIMUM": lambda rng, n: _min_max("MAXIMUM", rng, n),
    "MINIMUM": lambda rng, n: _min_max("MINIMUM", rng, n),
    "QUANTIZE": _quantize,
    "DEQUANTIZE": _dequantize,
    "HARD_SWISH": _hard_swish,
    "RELU": lambda rng, n: _relu("RELU", rng, n),
    "RELU6": lambda rng, n: _relu("RELU6", rng, n),
    "LEAKY_RELU": _leaky_relu,
    "PRELU": _prelu,
    **{op: (lambda rng, n, op=op: _reshape_family(op, rng, n))
       for op in ("RESHAPE", "SQUEEZE", "EXPAND_DIMS", "SHAPE", "TRANSPOSE")},
    **{op: (lambda rng, n, op=op: _concat_family(op, rng, n))
       for op in ("CONCATENATION", "PACK", "UNPACK", "SPLIT", "SPLIT_V")},
    "SLICE": lambda rng, n: _slices("SLICE", rng, n),
    "STRIDED_SLICE": lambda rng, n: _slices("STRIDED_SLICE", rng, n),
    "PAD": lambda rng, n: _pad("PAD", rng, n),
    "PADV2": lambda rng, n: _pad("PADV2", rng, n),
    "GATHER": _gather,
    "SPACE_TO_DEPTH": lambda rng, n: _space("SPACE_TO_DEPTH", rng, n),
    "SPACE_TO_BATCH_ND": lambda rng, n: _space("SPACE_TO_BATCH_ND", rng, n),
    "BATCH_TO_SPACE_ND": lambda rng, n: _space("BATCH_TO_SPACE_ND", rng, n),
}


def cases(op, rng, n):
    """About ``n`` random cases of ``op`` plus its adversarial ones."""
    return GENERATORS[op](rng, n)
