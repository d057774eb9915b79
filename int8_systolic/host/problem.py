"""Host-side driver model: turns a requantized GEMM into the accelerator's transfers and back.

Shared by the Amaranth-simulator tests and the cocotb testbenches: it folds the bias,
builds the per-channel table writes, tiles and zero-pads A and W into steps, and
reassembles result rows into the [M, N] output. It never computes the expected result
itself; that comes from :func:`golden.requantized_gemm`.
"""

import dataclasses

import numpy as np

from int8_systolic.golden import staged
from int8_systolic.golden.kernels import requantized_depthwise_gemm, requantized_gemm

__all__ = ["GemmProblem"]


@dataclasses.dataclass
class GemmProblem:
    """int8 ``lhs`` [M, K] x int8 ``rhs`` [K, N] with TFLite requantization parameters.

    With ``depthwise`` the problem is for the array's depthwise mode: ``lhs`` is [M, K, N], an
    activation per output channel, and ``out[m, n] = sum_k lhs[m, k, n] * rhs[k, n]`` (then
    requantized as a GEMM's): a depthwise convolution's patches against its taps.
    """

    lhs: np.ndarray
    rhs: np.ndarray
    bias: np.ndarray | None
    input_offset: int
    output_multiplier: np.ndarray
    output_shift: np.ndarray
    output_offset: int
    act_min: int = -128
    act_max: int = 127
    rounding: str = "double"
    bypass: bool = False
    depthwise: bool = False

    def __post_init__(self):
        want = 3 if self.depthwise else 2
        if np.ndim(self.lhs) != want:
            raise ValueError(f"a {'depthwise' if self.depthwise else 'GEMM'}-mode problem's lhs is "
                             f"{'[M, K, N]' if self.depthwise else '[M, K]'}, got shape {list(np.shape(self.lhs))}")

    @property
    def shape(self):
        return self.lhs.shape[0], self.lhs.shape[1], self.rhs.shape[1]

    def expected(self):
        """The golden model's answer: int8 results, or the int32 accumulators in bypass."""
        gemm = requantized_depthwise_gemm if self.depthwise else requantized_gemm
        st = gemm(self.lhs, self.rhs, self.bias, input_offset=self.input_offset,
                  output_multiplier=self.output_multiplier, output_shift=self.output_shift,
                  output_offset=self.output_offset, quantized_activation_min=self.act_min,
                  quantized_activation_max=self.act_max, rounding=self.rounding, return_stages=True)
        return (st.acc if self.bypass else st.output).astype(np.int64), st

    def folded_bias(self):
        return staged.fold_bias(self.bias, self.rhs.astype(np.int64).sum(axis=0), self.input_offset)

    def tiles(self, rows, cols):
        m, _, n = self.shape
        return -(-m // rows), -(-n // cols)

    def check_fits(self, rows, cols, max_col_tiles):
        """Refuse a problem the accelerator's per-channel tables cannot hold."""
        n_tiles = self.tiles(rows, cols)[1]
        if n_tiles > max_col_tiles:
            raise ValueError(f"N = {self.shape[2]} needs {n_tiles} column tiles of {cols}, but the tables hold "
                             f"max_col_tiles = {max_col_tiles} (N <= {max_col_tiles * cols}); split the layer "
                             f"or elaborate with a larger max_col_tiles")
        if self.shape[1] >= 2**24:
            raise ValueError(f"K = {self.shape[1]} exceeds the k_steps register (K < 2**24)")

    def layer_registers(self, rows, cols):
        return {"k_steps": self.shape[1], "n_tiles": self.tiles(rows, cols)[1], "output_offset": self.output_offset,
                "act_min": self.act_min, "act_max": self.act_max, "bypass": int(self.bypass),
                "depthwise": int(self.depthwise)}

    def table_writes(self, rows, cols):
        """(addr, lane, bias, multiplier, shift) per output channel, padded channels zero."""
        n = self.shape[2]
        n_pad = self.tiles(rows, cols)[1] * cols
        folded = np.zeros(n_pad, np.int64)
        folded[:n] = self.folded_bias()
        mult = np.zeros(n_pad, np.int64)
        mult[:n] = np.broadcast_to(self.output_multiplier, (n,))
        shift = np.zeros(n_pad, np.int64)
        shift[:n] = np.broadcast_to(self.output_shift, (n,))
        return [(c // cols, c % cols, int(folded[c]), int(mult[c]), int(shift[c])) for c in range(n_pad)]

    def steps(self, rows, cols):
        """Yield (act, w_row[cols]) for every step, row tile outer, column tile inner: ``act`` is the
        row tile's column of A (``rows`` values) or, in the depthwise mode, every cell's activation
        (``rows * cols`` values, cell (i, j)'s at ``j * rows + i``)."""
        _, k, n = self.shape
        mt, nt = self.tiles(rows, cols)
        w = np.zeros((k, nt * cols), np.int64)
        w[:, :n] = self.rhs
        a = np.zeros((mt * rows, k, nt * cols) if self.depthwise else (mt * rows, k), np.int64)
        a[tuple(slice(0, d) for d in self.lhs.shape)] = self.lhs
        for ti in range(mt):
            rs = slice(ti * rows, (ti + 1) * rows)
            for tj in range(nt):
                cs = slice(tj * cols, (tj + 1) * cols)
                # [k][i], or in the depthwise mode [k][j * rows + i]
                acts = a[rs, :, cs].transpose(1, 2, 0).reshape(k, cols * rows) if self.depthwise else a[rs].T
                for kk in range(k):
                    yield acts[kk].tolist(), w[kk, cs].tolist()

    def n_result_rows(self, rows, cols):
        mt, nt = self.tiles(rows, cols)
        return mt * nt * rows

    def assemble(self, result_rows, rows, cols):
        """Result rows (each ``cols`` ints, in arrival order) -> [M, N] array."""
        m, _, n = self.shape
        mt, nt = self.tiles(rows, cols)
        if len(result_rows) != mt * nt * rows:
            raise ValueError(f"expected {mt * nt * rows} result rows, got {len(result_rows)}")
        out = np.zeros((mt * rows, nt * cols), np.int64)
        it = iter(result_rows)
        for ti in range(mt):
            for tj in range(nt):
                for i in range(rows):
                    out[ti * rows + i, tj * cols:(tj + 1) * cols] = next(it)
        return out[:m, :n]
