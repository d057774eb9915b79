"""Register-level host driver of the AXI top: the programming model as code.

It talks to the block through cocotbext-axi (``AxiLiteMaster`` for the registers,
``AxiStreamSource`` for activations and weights, ``AxiStreamSink`` for results), with the
register offsets and fields of :mod:`hw.registers`. What it sends comes from
:class:`sim.host.GemmProblem` (table entries, steps); it never computes an expected result.

Per GEMM: :meth:`AxiDriver.load_table` (the entries of its output channels at a table base the
queued and running GEMMs do not use), :meth:`AxiDriver.push` (its descriptor), then
:meth:`AxiDriver.send_steps` (one frame per stream, TLAST on its last step) and
:meth:`AxiDriver.receive` (one frame of result rows, TLAST on the last).
"""

import logging
import warnings

import numpy as np
from cocotbext.axi import (
    AxiLiteBus,
    AxiLiteMaster,
    AxiResp,
    AxiStreamBus,
    AxiStreamFrame,
    AxiStreamSink,
    AxiStreamSource,
)

from int8_systolic.hw.registers import ID_MAGIC, reg

# cocotbext-axi 0.1.28 uses cocotb 1.x idioms (Event.data, Edge(signal), setimmediatevalue) that cocotb 2
# deprecates; the warnings are about its code, not ours.
warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"cocotbext\.axi")

__all__ = ["AxiDriver", "RegisterError"]


class RegisterError(RuntimeError):
    pass


def _pack_fields(name, **values):
    word = 0
    for fname, value in values.items():
        f = reg(name).field(fname.upper())
        word |= (int(value) & ((1 << f.width) - 1)) << f.lsb
    return word


class AxiDriver:
    def __init__(self, dut, rows, cols, seed=1):
        self.dut, self.rows, self.cols = dut, rows, cols
        # one step on s_axis_act: rows * cols bytes (a GEMM uses the first rows)
        self.act_step_bytes = rows * cols
        # fills a GEMM's unused s_axis_act bytes, which the accelerator must ignore
        self._noise = np.random.default_rng(seed)
        clk, rst = dut.aclk, dut.aresetn
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), clk, rst, reset_active_level=False)
        self.act = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis_act"), clk, rst, reset_active_level=False)
        self.wts = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis_wts"), clk, rst, reset_active_level=False)
        self.res = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis_res"), clk, rst, reset_active_level=False)
        self._staged = {}  # what the DESC_* registers hold, as far as this driver wrote them
        for bus in (self.axil.write_if, self.axil.read_if, self.act, self.wts, self.res):
            bus.log.setLevel(logging.WARNING)  # (they log every transfer at INFO)

    # registers
    async def write(self, name, value, expect_ok=True):
        resp = await self.axil.write(reg(name).offset, int(value & 0xFFFFFFFF).to_bytes(4, "little"))
        if expect_ok and resp.resp != AxiResp.OKAY:
            raise RegisterError(f"write of 0x{value & 0xFFFFFFFF:08X} to {name} answered {resp.resp!r}")
        return resp.resp

    async def write_queued(self, *writes):
        """Writes ``(name, value)`` handed to the bus master at once, so that each follows the one
        before as closely as the slave takes them (the tests of the register block's timing use
        it); returns the responses."""
        events = [self.axil.init_write(reg(name).offset, int(value & 0xFFFFFFFF).to_bytes(4, "little"))
                  for name, value in writes]
        for event in events:
            await event.wait()
        return [event.data.resp for event in events]

    async def write_offset(self, offset, value):
        """A raw write; returns the response (the tests of BAD_ACCESS use it)."""
        return (await self.axil.write(offset, int(value).to_bytes(4, "little"))).resp

    async def read(self, name):
        resp = await self.axil.read(reg(name).offset, 4)
        if resp.resp != AxiResp.OKAY:
            raise RegisterError(f"read of {name} answered {resp.resp!r}")
        return int.from_bytes(resp.data, "little")

    async def read_offset(self, offset):
        resp = await self.axil.read(offset, 4)
        return int.from_bytes(resp.data, "little"), resp.resp

    async def field(self, name, fname):
        f = reg(name).field(fname)
        return (await self.read(name) >> f.lsb) & ((1 << f.width) - 1)

    async def identify(self):
        """Check the magic value; return the elaborated configuration."""
        magic = await self.read("ID")
        if magic != ID_MAGIC:
            raise RegisterError(f"ID reads 0x{magic:08X}, not the magic 0x{ID_MAGIC:08X}: no accelerator here")
        config = await self.read("CONFIG")
        latency = await self.read("LATENCY")
        return {"rows": config & 0xFF, "cols": (config >> 8) & 0xFF,
                "rounding": ("double", "single")[(config >> 16) & 1],
                "queue_depth": config >> 24, "table_depth": await self.read("TABLE_DEPTH"),
                "latency": latency & 0xFFFF, "min_tile_steps": (latency >> 16) & 0xFF}

    # tables and descriptors
    async def load_table(self, problem, base):
        """Write the problem's per-channel entries at table rows base.. (TABLE_INDEX moves on by itself)."""
        await self.write("TABLE_INDEX", _pack_fields("TABLE_INDEX", lane=0, row=base))
        for _addr, _lane, bias, mult, shift in problem.table_writes(self.rows, self.cols):
            await self.write("TABLE_BIAS", bias)
            await self.write("TABLE_MULTIPLIER", mult)
            await self.write("TABLE_SHIFT", shift & 0x3F)

    def descriptor(self, problem, base):
        m_tiles, n_tiles = problem.tiles(self.rows, self.cols)
        return {"DESC_K": problem.shape[1], "DESC_N_TILES": n_tiles, "DESC_M_TILES": m_tiles,
                "DESC_TABLE_BASE": base, "DESC_MODE": _pack_fields("DESC_MODE", depthwise=int(problem.depthwise)),
                "DESC_OUTPUT": _pack_fields("DESC_OUTPUT", output_offset=problem.output_offset,
                                            act_min=problem.act_min, act_max=problem.act_max,
                                            bypass=int(problem.bypass))}

    async def push(self, problem, base, **override):
        """Stage the problem's descriptor (fields in ``override`` replaced, for error tests) and push it
        (not with ``DESC_PUSH=None``).
        Only the DESC_* registers whose value changes are written (the GEMMs of a layer differ in a
        field or two)."""
        push = override.pop("DESC_PUSH", 1)
        for name, value in {**self.descriptor(problem, base), **override}.items():
            if self._staged.get(name) != value:
                await self.write(name, value)
                self._staged[name] = value
        if push is not None:
            await self.write("DESC_PUSH", push)

    def forget(self):
        """After a reset: the DESC_* registers no longer hold what this driver wrote."""
        self._staged = {}

    # streams
    def step_frames(self, problem):
        """The activation and weight frames of a GEMM: one transfer per step, TLAST on the last. A
        GEMM-mode step's activation bytes past the first ``rows`` are random: they must be ignored."""
        steps = list(problem.steps(self.rows, self.cols))
        a = np.array([s[0] for s in steps], np.int64).astype(np.int8)
        if a.shape[1] < self.act_step_bytes:
            pad = self._noise.integers(-128, 128, (len(steps), self.act_step_bytes - a.shape[1])).astype(np.int8)
            a = np.concatenate([a, pad], axis=1)
        a = a.tobytes()
        w = np.array([s[1] for s in steps], np.int64).astype(np.int8).tobytes()
        return AxiStreamFrame(a), AxiStreamFrame(w)

    async def send_steps(self, problem):
        a, w = self.step_frames(problem)
        await self.act.send(a)
        await self.wts.send(w)

    async def receive(self, problem):
        """One GEMM's result frame -> the [M, N] array (int32 lanes; int8 results sign-extended)."""
        frame = await self.res.recv()
        rows = np.frombuffer(bytes(frame.tdata), "<i4").reshape(-1, self.cols)
        if len(rows) != problem.n_result_rows(self.rows, self.cols):
            raise RegisterError(f"the result frame has {len(rows)} rows, the GEMM {problem.shape} "
                                f"{problem.n_result_rows(self.rows, self.cols)}: TLAST misplaced")
        return problem.assemble(rows.astype(np.int64).tolist(), self.rows, self.cols)
