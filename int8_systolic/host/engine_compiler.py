"""The memory engine's compiler: a .tflite model (through the golden interpreter) -> a memory image and a plan.

:func:`compile_model` walks subgraph 0's operators in order and gives each MAC layer the engine can
run (CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED with constant weights, whose tensors fit the engine's
buffers: the same checks as :class:`hw.layer_check.LayerCheck`) a command, or several for a layer larger than
the buffers (:func:`_tiles`: row bands, channel chunks; docs/engine.md, Tiling); every other operator, and a
MAC layer the engine cannot run (the plan says why), is the host's, except a PAD folded into the window of the
convolution it feeds (:func:`_pad_folds`: no barrier for it). Consecutive engine layers form a
*segment*: one run of the command list, ended by a BARRIER (the host then runs the operators up to
the next segment and says GO again) or, for the last segment, by END.

The memory image (:class:`Program`):

- the **read-only window** (from ``ro_base``): the command list, aligned to 64 bytes; then every command's
  weights in the engine's layout, in command order and one after another (whole bus words; a layer in bands has
  a copy for each), so that the engine reads them as one run ahead of the commands (each command's
  ``weights_ahead``: the bytes of the run after its own); then each engine layer's per-channel table (the input
  zero point folded into the bias), aligned to 64 bytes;
- the **read-write window** (from ``rw_base``): every activation tensor an engine layer reads or
  writes, each in its own place (no reuse), aligned to 64 bytes. The host writes a segment's
  inputs that it computed (or the graph's) before GO, and reads the segment's outputs after.

Bytes over the port and the MAC layers' tensor bytes are counted by the testbench; the plan
gives each engine layer's tensor bytes (input, weights, bias, output, once each) to divide by.
"""

import dataclasses
import itertools
import math
import typing

import numpy as np

from ..hw import commands
from ..hw.depthwise_gen import InputLayout, input_pitch, input_split
from ..hw.engine import input_buffer_shape
from ..hw.table_loader import ENTRY_BYTES
from .engine_layout import table_image, weights_image
from .windows import Geometry, feed_efficiency, stack_cycles, stackable, stacked, stacked_bytes

__all__ = ["EngineLayer", "Program", "compile_model"]

ALIGN = 64
ENGINE_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")


def _align(n):
    return -(-n // ALIGN) * ALIGN


@dataclasses.dataclass
class EngineLayer:
    op_index: int
    kind: str
    input_tensor: int
    output_tensor: int
    input_addr: int
    output_addr: int
    output_shape: tuple
    macs: int
    tensor_bytes: int          # input, weights, bias and output, once each
    segment: int
    commands: int = 1          # its commands in the list: more than one when it is tiled
    kept: bool = False         # its output kept on chip only (fused bands): never in memory
    pad_folded: int | None = None   # the op index of the PAD folded into its window (its input is the PAD's)


@dataclasses.dataclass
class Program:
    memory: bytearray          # the whole image, address 0 at byte 0: read-only window, then read-write window
    ro: tuple                  # (base, limit)
    rw: tuple
    list_addr: int
    layers: dict               # op index -> EngineLayer
    segments: list             # per segment: the op indices of its engine layers, in order
    host_macs: dict            # op index -> why the host runs that MAC layer
    tensor_addr: dict          # tensor index -> address in the read-write window
    command_ops: list          # per segment: the op index of each of its commands, in list order

    def segment_inputs(self, seg):
        """The tensors a segment reads that it does not write (the host puts them in memory before GO)."""
        written = {self.layers[op].output_tensor for op in self.segments[seg]}
        return sorted({self.layers[op].input_tensor for op in self.segments[seg]} - written)


def _should_stack(g, out_c, *, rows, cols, data_width, in_depth):
    """Whether to row-stack a CONV_2D's input (:func:`host.windows.stacked`): when the window generator feeds it
    faster so (short runs: few channels), the stacked input fits the buffer and the stacker (a group of pixels a
    cycle for each stacked row it goes to: :func:`host.windows.stack_cycles`) keeps ahead of the array."""
    width = input_buffer_shape(rows, cols, data_width)[0]
    if not stackable(g, data_width // 8) or stacked_bytes(g) > in_depth:
        return False
    if min(1.0, feed_efficiency(stacked(g), rows, width)) <= min(1.0, feed_efficiency(g, rows, width)):
        return False
    array_cycles = -(-g.pixels // rows) * -(-out_c // cols) * g.k
    return stack_cycles(g, width, data_width // 8) <= array_cycles


def _window_refusal(g):
    """Why the engine's window generators cannot run this geometry (None: they can), as
    :class:`hw.layer_check.LayerCheck`'s shape check: every window starts inside the input (or its top and left
    padding) and the padding above and left of the input is no wider than the kernel's reach."""
    if (g.out_h - 1) * g.stride_h >= g.in_h + g.pad_top or (g.out_w - 1) * g.stride_w >= g.in_w + g.pad_left:
        return "a window starts past the input's last row or column"
    if g.pad_top > (g.kernel_h - 1) * g.dilation_h or g.pad_left > (g.kernel_w - 1) * g.dilation_w:
        return "its padding above or left of the input is wider than the kernel reaches"
    return None


def _geometry(interp, op):
    """A CONV_2D's or DEPTHWISE_CONV_2D's geometry over its input tensor (TFLite's SAME/VALID resolved), or None."""
    sg = interp.model.subgraphs[0]
    params = interp.params.get((0, op.index))
    w_t = sg.tensors[op.inputs[1]]
    if op.op not in ("CONV_2D", "DEPTHWISE_CONV_2D") or params is None or w_t.data is None:
        return None
    geo = params["geometry"]
    kernel = w_t.shape[1:3]
    return Geometry.of(tuple(sg.tensors[op.inputs[0]].shape), kernel, geo["stride"], geo["dilation"], geo["padding"])


class _Fold(typing.NamedTuple):
    """A PAD folded into the window of the convolution that reads it (:func:`_pad_folds`)."""
    pad_op: int               # the PAD's op index
    input_tensor: int         # the PAD's input: the convolution's, folded
    geometry: Geometry        # the convolution's over it, the PAD's rows above and columns left in its padding


def _pad_folds(interp):
    """The PADs folded into the window of the convolution that reads them: {the PAD's output tensor: its
    :class:`_Fold`}. A PAD folds where its output's only reader is a CONV_2D or DEPTHWISE_CONV_2D (not a graph
    output), it pads height and width only, with the value the convolution's own padding uses (its input's zero
    point: PAD's always is, PADV2's constant must be), and the convolution over the unpadded input, with the pad
    added to its own, is a window the engine runs. The convolution then reads the PAD's input and the padded
    tensor is never in memory: the engine puts the zero point in those taps itself, exactly as the PAD would have
    (docs/engine.md, the compiler)."""
    sg = interp.model.subgraphs[0]
    folds = {}
    for op in sg.operators:
        if op.op not in ("PAD", "PADV2"):
            continue
        params, out = interp.params.get((0, op.index)), op.outputs[0]
        readers = [o for o in sg.operators if out in o.inputs]
        if params is None or out in sg.outputs or len(readers) != 1 or readers[0].inputs[0] != out:
            continue
        cons = readers[0]
        g, cons_params = _geometry(interp, cons), interp.params.get((0, cons.index))
        pads = params["paddings"]
        if g is None or len(pads) != 4 or any(pads[0]) or any(pads[3]):
            continue
        value = params["pad_value"]
        if value is None:           # PADV2: its constant, when it is one
            data = sg.tensors[op.inputs[2]].data
            value = None if data is None else int(np.asarray(data).reshape(-1)[0])
        if value != -int(cons_params["params"]["input_offset"]):
            continue
        (top, bottom), (left, right) = pads[1], pads[2]
        folded = dataclasses.replace(g, in_h=g.in_h - top - bottom, in_w=g.in_w - left - right,
                                     pad_top=g.pad_top + top, pad_left=g.pad_left + left)
        if _window_refusal(folded) is None:
            folds[out] = _Fold(op.index, op.inputs[0], folded)
    return folds


def _engine_refusal(g, out_c, k, n_tiles, *, cols, data_width, in_depth, w_depth, out_depth, max_col_tiles,
                    stack=False, depthwise=False):
    """Why the engine cannot run a layer of this shape (None: it can), as :class:`hw.layer_check.LayerCheck`."""
    nb = data_width // 8
    up = lambda v: -(-v // nb) * nb  # noqa: E731
    if stack:
        if stacked_bytes(g) > in_depth:
            return f"its input row-stacked ({stacked_bytes(g)} bytes) is larger than the input buffer ({in_depth})"
    elif g.batch * g.in_h * g.in_w * g.in_c > in_depth:
        return f"its input ({g.batch * g.in_h * g.in_w * g.in_c} bytes) is larger than the input buffer ({in_depth})"
    held = _in_buf(g, stack, cols=cols, data_width=data_width, depthwise=depthwise)
    if not stack and held > in_depth:
        return (f"its input as the buffer holds it ({held} bytes: its pitch and, at stride 2, its split by parity) "
                f"is larger than the input buffer ({in_depth})")
    if up(n_tiles * k * cols) > w_depth:
        return f"its weights ({n_tiles * k * cols} bytes in the engine's layout) exceed the weight buffer ({w_depth})"
    if g.pixels * out_c > out_depth:
        return f"its output ({g.pixels * out_c} bytes) is larger than the output buffer ({out_depth})"
    if n_tiles > max_col_tiles:
        return f"its {out_c} output channels need {n_tiles} table rows, the tables hold {max_col_tiles}"
    if k >= 1 << 24:
        return f"K = {k} is 2**24 or more"
    return None


def _band(g, out_c, oy0, oy1, b=0):
    """Output rows [oy0, oy1) of image ``b`` as a layer of their own: (its geometry, the input rows (first, last)
    its windows reach, the byte offsets of its input and output). ``pad_top`` only where the band reaches above
    the input; below it, the engine's reads past the band's rows are the padding."""
    top = oy0 * g.stride_h - g.pad_top          # the band's first window's first row
    y_lo = max(0, top)
    y_hi = min(g.in_h - 1, (oy1 - 1) * g.stride_h - g.pad_top + (g.kernel_h - 1) * g.dilation_h)
    part = Geometry(1, y_hi - y_lo + 1, g.in_w, g.in_c, oy1 - oy0, g.out_w, g.kernel_h, g.kernel_w,
                    g.stride_h, g.stride_w, g.dilation_h, g.dilation_w, y_lo - top, g.pad_left)
    return part, (y_lo, y_hi), (b * g.in_h + y_lo) * g.in_w * g.in_c, (b * g.out_h + oy0) * g.out_w * out_c


def _layout(g, *, cols, data_width, depthwise=False):
    """How the engine's input buffer holds a layer's input (:class:`hw.depthwise_gen.InputLayout`)."""
    nb = data_width // 8
    pitch = input_pitch(g.in_c, input_buffer_shape(1, cols, data_width)[1], nb)
    split = input_split(g.in_c, g.stride_h, g.stride_w, nb) if depthwise else (False, False)
    return InputLayout(g.in_h, g.in_w, pitch, *split)


def _in_buf(g, stack, *, cols, data_width, depthwise=False):
    """The bytes a layer's input takes in the engine's input buffer (:class:`hw.layer_check.LayerCheck`'s in_buf)."""
    if stack:
        return stacked_bytes(g)
    return g.batch * _layout(g, cols=cols, data_width=data_width, depthwise=depthwise).image_bytes


def _fused_bands(prod, cons, *, lanes, cols, data_width, max_col_tiles, in_depth, **depths):
    """A producer and the consumer of its output, the consumer too large for the buffers, in interleaved row bands:
    each consumer band's input is exactly a producer band's output (the producer's bands overlapping by the
    consumer's halo, those rows computed twice), which the engine keeps in its input buffer beside the producer
    band's input, so the tensor between them is never read back. ``prod``, ``cons``: (kind, geometry, out_c, k,
    stack); ``lanes``: a row of the input buffer's banks (the capture starts on one). Returns (producer parts,
    consumer parts), band for band, or None (no band count fits, or the producer's bands would leave rows of the
    tensor unwritten)."""
    (pk, pg, pc, pkk, pstack), (ck, cg, cc, ckk, cstack) = prod, cons
    if pg.batch != 1 or cg.batch != 1 or cstack or pk == "FULLY_CONNECTED" or ck == "FULLY_CONNECTED":
        return None
    nb = data_width // 8
    kw = {"cols": cols, "data_width": data_width, "max_col_tiles": max_col_tiles, "in_depth": in_depth, **depths}
    for n in range(2, cg.out_h + 1):
        h = -(-cg.out_h // n)
        p_parts, c_parts, rows = [], [], set()
        for oy0 in range(0, cg.out_h, h):
            c_part, (y_lo, y_hi), c_in, c_out = _band(cg, cc, oy0, min(cg.out_h, oy0 + h))
            p_part, _, p_in, p_out = _band(pg, pc, y_lo, y_hi + 1)
            rows.update(range(y_lo, y_hi + 1))
            fits = (p_out == c_in and (p_in | p_out | c_out) % nb == 0
                    and _engine_refusal(p_part, pc, pkk, -(-pc // cols), stack=pstack,
                                        depthwise=pk == "DEPTHWISE_CONV_2D", **kw) is None
                    and _engine_refusal(c_part, cc, ckk, -(-cc // cols), depthwise=ck == "DEPTHWISE_CONV_2D",
                                        **kw) is None
                    and _in_buf(p_part, pstack, cols=cols, data_width=data_width,
                                depthwise=pk == "DEPTHWISE_CONV_2D")
                    + _in_buf(c_part, False, cols=cols, data_width=data_width, depthwise=ck == "DEPTHWISE_CONV_2D")
                    + lanes <= in_depth)
            if not fits:
                break
            p_parts.append((p_part, pc, p_in, p_out, 0, 0))
            c_parts.append((c_part, cc, c_in, c_out, 0, 0))
        else:
            if rows == set(range(pg.out_h)):
                return p_parts, c_parts
    return None


def _tiles(kind, g, out_c, k, *, stack, cols, data_width, max_col_tiles, **depths):
    """A layer too large for the engine's buffers as several commands, each within them, or None. Row bands
    (CONV_2D, DEPTHWISE_CONV_2D, per image): each band's output rows and the input rows their windows reach
    (the halo read again), the top padding only where the band reaches it, the bottom padding as the engine
    computes it (reads past the band's rows); the tallest bands that fit. Channel chunks (a layer of one output
    pixel, FULLY_CONNECTED at batch 1: its output channels contiguous): whole column tiles of weights, table and
    output. Each part: (geometry, out_c, input, output, weights and table byte offsets); every offset a whole bus
    word, as the engine requires."""
    nb = data_width // 8

    def fits(part_g, part_out_c):
        n = -(-part_out_c // cols)
        return _engine_refusal(part_g, part_out_c, k, n, cols=cols, data_width=data_width,
                               max_col_tiles=max_col_tiles, stack=stack, depthwise=kind == "DEPTHWISE_CONV_2D",
                               **depths) is None

    if kind in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        for band in range(g.out_h, 0, -1):
            parts = []
            for b in range(g.batch):
                for oy0 in range(0, g.out_h, band):
                    part, _, in_off, out_off = _band(g, out_c, oy0, min(g.out_h, oy0 + band), b)
                    if in_off % nb or out_off % nb or not fits(part, out_c):
                        break
                    parts.append((part, out_c, in_off, out_off, 0, 0))
                else:
                    continue
                break
            else:
                if len(parts) > 1:
                    return parts
    elif g.pixels == 1:
        n_tiles = -(-out_c // cols)
        step = nb // math.gcd(nb, cols)      # a chunk's tiles: whole bus words of output (and of table entries)
        for chunk in range(n_tiles - n_tiles % step or step, 0, -step):
            parts = []
            for nt0 in range(0, n_tiles, chunk):
                n0, n1 = nt0 * cols, min(out_c, (nt0 + chunk) * cols)
                if (nt0 * k * cols) % nb or not fits(g, n1 - n0):
                    break
                parts.append((g, n1 - n0, 0, n0, nt0 * k * cols, n0 * ENTRY_BYTES))
            else:
                if len(parts) > 1:
                    return parts
    return None


def compile_model(interp, *, rows=None, cols=8, data_width=64, in_depth=32768, w_depth=65536, out_depth=32768,
                  max_col_tiles=64, ro_base=0x0, rw_base=None):
    """The memory image and plan of ``interp``'s model (a :class:`golden.tflite.interpreter.Interpreter`) for an
    engine of these parameters (:class:`hw.engine.Engine`'s; ``rows`` defaults to ``cols``). A CONV_2D with few
    channels gets its input row-stacked where that feeds the array faster (:func:`host.windows.stacked`)."""
    rows = cols if rows is None else rows
    sg = interp.model.subgraphs[0]
    layers, host_macs, segments = {}, {}, [[]]
    weights_blobs = []            # (op index, weights bytes, table bytes)
    fields, info = {}, {}
    folds = _pad_folds(interp)
    folded_pads = {fold.pad_op for fold in folds.values()}
    for op in sg.operators:
        params = interp.params.get((0, op.index))
        kind = op.op
        if kind not in ENGINE_OPS:
            if op.index in folded_pads:       # (in its reader's window: not the host's, no barrier)
                continue
            if segments[-1]:
                segments.append([])
            continue
        reason = None
        w_t = sg.tensors[op.inputs[1]]
        b_t = sg.tensors[op.inputs[2]] if len(op.inputs) > 2 and op.inputs[2] != -1 else None
        fold = folds.get(op.inputs[0])   # (a PAD before it, folded: the convolution reads the PAD's input)
        x_t = sg.tensors[op.inputs[0] if fold is None else fold.input_tensor]
        y_t = sg.tensors[op.outputs[0]]
        if w_t.data is None or (b_t is not None and b_t.data is None):
            reason = "its weights or bias are not constant"
        if reason is None:
            p = params["params"]
            multiplier = 1
            if kind == "FULLY_CONNECTED":
                k = params["k"]
                g = Geometry(batch=int(np.prod(x_t.shape)) // k, in_h=1, in_w=1, in_c=k, out_h=1, out_w=1,
                             kernel_h=1, kernel_w=1)
                weights = np.asarray(w_t.data, np.int8)
            else:
                g = _geometry(interp, op) if fold is None else fold.geometry
                weights = np.asarray(w_t.data, np.int8)
                if kind == "DEPTHWISE_CONV_2D":
                    # [1, KH, KW, N] as [N, KH, KW]: K is the taps
                    weights = weights[0].transpose(2, 0, 1)
                    multiplier = int(params["geometry"]["depth_multiplier"])
            out_c = weights.shape[0]
            n_tiles = -(-out_c // cols)
            k = weights.size // out_c
            stack = kind == "CONV_2D" and _should_stack(g, out_c, rows=rows, cols=cols, data_width=data_width,
                                                        in_depth=in_depth)
            depths = {"in_depth": in_depth, "w_depth": w_depth, "out_depth": out_depth}
            reason = _engine_refusal(g, out_c, k, n_tiles, cols=cols, data_width=data_width,
                                     max_col_tiles=max_col_tiles, stack=stack,
                                     depthwise=kind == "DEPTHWISE_CONV_2D", **depths)
            parts = [(g, out_c, 0, 0, 0, 0)]
            if reason is not None:
                tiled = _tiles(kind, g, out_c, k, stack=stack, cols=cols, data_width=data_width,
                               max_col_tiles=max_col_tiles, **depths)
                if tiled is None:
                    reason += "; no tiling of it fits (row bands, or channel chunks of a one-pixel output)"
                else:
                    parts, reason = tiled, None
        if reason is None:
            mult = np.broadcast_to(np.asarray(p["output_multiplier"], np.int64), (out_c,))
            shift = np.broadcast_to(np.asarray(p["output_shift"], np.int64), (out_c,))
            bias = None if b_t is None else np.asarray(b_t.data, np.int64)
            try:
                table = table_image(bias, weights, -int(p["input_offset"]), mult, shift)
            except ValueError as exc:
                reason = f"its table cannot be stored: {exc}"
        if reason is not None:
            host_macs[op.index] = reason
            if segments[-1]:
                segments.append([])
            continue
        segments[-1].append(op.index)
        weights_blobs.append((op.index, weights_image(weights, cols, stack=stack), table))
        # each command: its fields and the offsets of its input, output, weights and table in the layer's
        def make(parts, keep=False, kind=kind, stack=stack, multiplier=multiplier, p=p):
            return [({
                "op": kind, "stack": int(stack), "keep": int(keep),
                "batch": pg.batch, "in_h": pg.in_h, "in_w": pg.in_w, "in_c": pg.in_c, "out_h": pg.out_h,
                "out_w": pg.out_w, "out_c": part_c, "depth_multiplier": multiplier, "kernel_h": pg.kernel_h,
                "kernel_w": pg.kernel_w, "stride_h": pg.stride_h, "stride_w": pg.stride_w,
                "dilation_h": pg.dilation_h, "dilation_w": pg.dilation_w, "pad_top": pg.pad_top,
                "pad_left": pg.pad_left, "input_zero_point": -int(p["input_offset"]),
                "output_zero_point": int(p["output_offset"]), "act_min": int(p["quantized_activation_min"]),
                "act_max": int(p["quantized_activation_max"])}, offsets)
                for pg, part_c, *offsets in parts]
        fields[op.index] = make(parts)
        info[op.index] = ((kind, g, out_c, k, stack), make)
        in_bytes = int(np.prod(x_t.shape))
        out_bytes = int(np.prod(y_t.shape))
        layers[op.index] = EngineLayer(
            op.index, kind, op.inputs[0] if fold is None else fold.input_tensor, op.outputs[0], 0, 0,
            tuple(y_t.shape), g.pixels * k * out_c,
            in_bytes + weights.size + (0 if b_t is None else 4 * out_c) + out_bytes, len(segments) - 1, len(parts),
            pad_folded=None if fold is None else fold.pad_op)
    segments = [s for s in segments if s]
    for i, seg in enumerate(segments):
        for op_index in seg:
            layers[op_index].segment = i
    # a layer reading the layer before's output from memory, bound by that read (the tensor cannot stay on chip
    # beside the layer before's input, and reading it takes longer than the layer's steps): the two layers'
    # bands interleaved, each band's input kept on chip (_fused_bands)
    fused = {}                    # producer op -> its consumer op
    _, bank_bytes, banks = input_buffer_shape(rows, cols, data_width)
    lanes = bank_bytes * banks
    for prod, cons in (pair for seg in segments for pair in itertools.pairwise(seg)):
        (_, prod_g, _, _, prod_stack), (cons_kind, cons_g, cons_c, cons_k, cons_stack) = info[prod][0], info[cons][0]
        if layers[cons].input_tensor != layers[prod].output_tensor or prod in fused or prod in fused.values():
            continue
        cons_in = _in_buf(cons_g, cons_stack, cols=cols, data_width=data_width,
                          depthwise=cons_kind == "DEPTHWISE_CONV_2D")
        on_chip = (layers[prod].commands == 1 and layers[cons].commands == 1
                   and _in_buf(prod_g, prod_stack, cols=cols, data_width=data_width,
                               depthwise=info[prod][0][0] == "DEPTHWISE_CONV_2D") + cons_in + lanes <= in_depth)
        steps = -(-cons_g.pixels // rows) * -(-cons_c // cols) * (cons_k if cons_kind == "CONV_2D" else
                                                                   cons_g.kernel_h * cons_g.kernel_w)
        if on_chip or cons_g.batch * cons_g.in_h * cons_g.in_w * cons_g.in_c <= steps * (data_width // 8):
            continue
        got = _fused_bands(info[prod][0], info[cons][0], lanes=lanes, cols=cols, data_width=data_width,
                           max_col_tiles=max_col_tiles, in_depth=in_depth, w_depth=w_depth, out_depth=out_depth)
        if got is not None:
            # (the producer's output kept on chip only when nothing else reads it)
            tensor = layers[prod].output_tensor
            # (or through a PAD folded into the consumer's window, the PAD's only reader)
            readers = [o.index for o in sg.operators if tensor in o.inputs]
            keep = tensor not in sg.outputs and readers in ([cons], [layers[cons].pad_folded])
            fields[prod], fields[cons] = info[prod][1](got[0], keep), info[cons][1](got[1])
            layers[prod].commands = layers[cons].commands = len(got[0])
            layers[prod].kept = keep
            fused[prod] = cons
    # an output the next command reads on chip (captured beside the producer's input, read in place: the engine's
    # forward) and nothing else reads is kept on chip only: never written (the next layer's drain then need not
    # wait for those writes)
    for prod, cons in (pair for seg in segments for pair in itertools.pairwise(seg)):
        if prod in fused or cons in fused or prod in fused.values() or cons in fused.values():
            continue
        (prod_kind, prod_g, prod_c, _, prod_stack), (cons_kind, cons_g, _, _, cons_stack) = info[prod][0], info[cons][0]
        tensor = layers[prod].output_tensor
        readers = [o.index for o in sg.operators if tensor in o.inputs]
        # (as the engine forwards it: the consumer's input the producer's output, shape for shape, so that it
        # takes the same bytes in the buffer; a FULLY_CONNECTED reading a feature map directly does not)
        same = (cons_g.batch, cons_g.in_h, cons_g.in_w, cons_g.in_c) == (prod_g.batch, prod_g.out_h, prod_g.out_w,
                                                                          prod_c)
        if (layers[cons].input_tensor != tensor or not same or cons_stack or layers[prod].commands != 1
                or layers[cons].commands != 1 or tensor in sg.outputs
                or readers not in ([cons], [layers[cons].pad_folded])):
            continue
        cons_in = _in_buf(cons_g, cons_stack, cols=cols, data_width=data_width,
                          depthwise=cons_kind == "DEPTHWISE_CONV_2D")
        if _in_buf(prod_g, prod_stack, cols=cols, data_width=data_width,
                   depthwise=prod_kind == "DEPTHWISE_CONV_2D") + cons_in + lanes <= in_depth:
            fields[prod][0][0]["keep"] = 1
            layers[prod].kept = True
    # each segment's commands in order: (op, part), a fused pair's bands alternating
    order = []
    for seg in segments:
        order.append([])
        for op_index in seg:
            if op_index in fused:
                order[-1] += [(o, j) for j in range(layers[op_index].commands) for o in (op_index, fused[op_index])]
            elif op_index not in fused.values():
                order[-1] += [(op_index, j) for j in range(layers[op_index].commands)]

    # the read-only window: the list, then the weights of every command in command order, one after another (the
    # engine reads them as one run, ahead of the commands: each command's weights_ahead), then the tables
    n_commands = sum(layers[op].commands for s in segments for op in s) + len(segments)
    addr = ro_base + _align(n_commands * 4 * commands.WORDS)
    nb = data_width // 8
    wimgs = {op_index: wimg for op_index, wimg, _ in weights_blobs}
    ro_items, t_addr, cmd_w = [], {}, {}
    for op_index, j in (c for seg_order in order for c in seg_order):
        f, (_, _, w_off, _) = fields[op_index][j]
        wimg = wimgs[op_index]
        layer_tiles = -(-layers[op_index].output_shape[-1] // cols)
        length = -(-f["out_c"] // cols) * (len(wimg) // layer_tiles)
        blob = wimg[w_off:w_off + length]
        ro_items.append((addr, blob))
        cmd_w[op_index, j] = (addr, addr + -(-len(blob) // nb) * nb)
        addr = cmd_w[op_index, j][1]
    w_run_end = addr
    addr = _align(addr)
    for op_index, _, timg in weights_blobs:
        t_addr[op_index], addr = addr, addr + _align(len(timg))
        ro_items.append((t_addr[op_index], timg))
    ro_limit = _align(addr)
    # the read-write window: every tensor an engine layer touches
    rw_base = ro_limit if rw_base is None else rw_base
    tensor_addr, addr = {}, rw_base
    for layer in sorted(layers.values(), key=lambda L: L.op_index):
        for ti in (layer.input_tensor, layer.output_tensor):
            if ti not in tensor_addr:
                tensor_addr[ti], addr = addr, addr + _align(int(np.prod(sg.tensors[ti].shape)) + data_width // 8)
        layer.input_addr, layer.output_addr = tensor_addr[layer.input_tensor], tensor_addr[layer.output_tensor]
    rw_limit = _align(addr)
    memory = bytearray(rw_limit)
    for a, blob in ro_items:
        memory[a:a + len(blob)] = blob
    # the command list: each segment's commands, then BARRIER (END after the last)
    raw = []
    for i, seg_order in enumerate(order):
        cmds = []
        for op_index, j in seg_order:
            L = layers[op_index]
            f, (in_off, out_off, _, t_off) = fields[op_index][j]
            w_at, w_end = cmd_w[op_index, j]
            cmds.append({**f, "input_addr": L.input_addr + in_off, "output_addr": L.output_addr + out_off,
                         "weights_addr": w_at, "table_addr": t_addr[op_index] + t_off,
                         "weights_ahead": w_run_end - w_end})
        # an output the next command reads on chip, as that command holds its input: split by parity before a
        # stride-2 DEPTHWISE_CONV_2D (hw.depthwise_gen.InputLayout)
        for cmd, nxt in itertools.pairwise(cmds):
            if (nxt["op"] == "DEPTHWISE_CONV_2D" and nxt["input_addr"] == cmd["output_addr"]
                    and all(nxt[a] == cmd[b] for a, b in (("in_c", "out_c"), ("in_h", "out_h"), ("in_w", "out_w"),
                                                          ("batch", "batch")))):
                split_h, split_w = input_split(nxt["in_c"], nxt["stride_h"], nxt["stride_w"], data_width // 8)
                cmd.update(out_split_h=int(split_h), out_split_w=int(split_w))
        raw += [commands.pack(**cmd) for cmd in cmds]
        raw.append(commands.pack(op="END" if i == len(segments) - 1 else "BARRIER"))
    blob = b"".join(raw)
    memory[ro_base:ro_base + len(blob)] = blob
    return Program(memory, (ro_base, ro_limit), (rw_base, rw_limit), ro_base, layers, segments, host_macs,
                   tensor_addr, [[op for op, _ in seg_order] for seg_order in order])
