"""The memory engine: the core fed from on-chip buffers that the engine fills itself, from a command list in memory.

docs/engine.md is the design. This component is the engine without its register block: control
signals in, an AXI4 master out (``m_axi_*``, :func:`hw.axi_reader.axi4_read_members` and
:func:`hw.axi_writer.axi4_write_members`).

Control: with ``list_addr`` and the two windows set, ``go`` starts the list (or resumes it after a
BARRIER). For each MAC command, in order:

1. :class:`hw.command_fetch.CommandFetch` reads it (inside the read-only window) and checks its op and
   fields; :class:`hw.layer_check.LayerCheck` computes its sizes and checks them. A refused command
   stops the list before anything of it is read: ``error`` (:data:`ERRORS`) and ``error_index`` (the
   command's index in the list) hold until the next ``go``.
2. The table is read into the core's tables (:class:`hw.table_loader.TableLoader`); then the input
   and the weights (:class:`hw.loader.Loader`, into byte-banked buffers), in chunks that take turns
   on the read port (:class:`hw.read_arbiter.ReadArbiter`); a command with ``stack`` has its input
   row-stacked on the way (:class:`hw.stacker.Stacker`: few-channel layers).
3. Once the table is in, the layer runs while the input and weights still arrive:
   :class:`hw.window_gen.WindowGenerator` builds the activation steps from the input buffer and
   :class:`hw.weight_streamer.WeightStreamer` streams the weights, each waiting for the bytes it
   needs; the core (the GEMM scheduler and framer of the AXI top launch it) computes;
   :class:`hw.result_packer.ResultPacker` assembles the int8 NHWC output and hands each completed
   row tile's bytes to :class:`hw.axi_writer.AxiWriter` (inside the read-write window) as it goes.
4. Once the layer's steps are all taken, the next command starts while this one's last results are
   computed, packed and written (the *drain*): a layer that reads the last one's output, captured in
   the input buffer, waits for each byte as it lands there. The drain of the next layer starts when
   this one's output is written (its write responses in). A layer reading from memory what the draining
   layer writes there is taken only once that drain has ended.

``layer_done`` pulses when a command's output is written (its last write response in); ``step``
is high for each array step, ``mem_wait`` in each cycle a layer with steps to come offered none
(its activations or weights not yet read, or being set up).
``END`` ends the list (``done`` pulses), ``BARRIER`` stops it (``barrier`` pulses). ``busy`` is high
from the cycle after ``go`` until the engine is ready for the next ``go`` (with or after ``done``,
``barrier`` or the error bits); a ``go`` while ``busy`` is ignored. A read or write answered with an
error response sets ``BUS``: no command is taken after it, the ones taken complete, and
``error_index`` names a write's layer, or a read's (the layer loading its input, else the command
being prepared). Reset the engine only
together with its AXI slave (docs/engine.md, Reset).

Buffers (bytes, powers of two): ``in_depth`` (a layer's input), ``w_depth`` (its weights, the
engine's layout), ``out_depth`` (its output). This engine runs a layer whose tensors fit its
buffers, one layer at a time, loads and write-back overlapping that layer's compute; prefetching
the next layer and tiling come next (docs/engine.md, order of work).
"""

from amaranth import Module, Mux, Signal, signed
from amaranth.lib import fifo, wiring
from amaranth.lib.wiring import In, Out

from . import commands
from .accelerator import Accelerator
from .axi_reader import AxiReader, axi4_read_members
from .axi_writer import AxiWriter, axi4_write_members
from .byte_buffer import ByteBuffer
from .command_fetch import ERRORS as FETCH_ERRORS
from .command_fetch import CommandFetch
from .depthwise_gen import DepthwiseWindows, input_pitch
from .gemm_scheduler import GemmScheduler
from .layer_check import ERRORS as CHECK_ERRORS
from .layer_check import LayerCheck
from .loader import Loader
from .read_arbiter import ReadArbiter
from .result_framer import ResultFramer
from .result_packer import ResultPacker
from .stacker import Stacker
from .table_loader import TableLoader
from .weight_prefetch import WeightPrefetch
from .weight_streamer import WeightStreamer
from .window_gen import WindowGenerator
from .write_queue import WriteQueue

__all__ = ["ERRORS", "Engine", "input_buffer_shape"]

# the engine's error bits: the fetcher's, the layer check's, then a bus error response
ERRORS = {**FETCH_ERRORS, **{name: len(FETCH_ERRORS) + bit for name, bit in CHECK_ERRORS.items()}}
ERRORS["BUS"] = len(ERRORS)


def _pow2(n):
    return n >= 1 and n & (n - 1) == 0


def input_buffer_shape(rows, cols, data_width):
    """The engine's input buffer for an array of ``rows`` x ``cols`` and a ``data_width``-bit port: (the window
    generator's read width, bytes a bank, banks) in bytes. The generator reads 16 bytes: a run of up to 16
    bytes (3x3 over 3 channels: 9) is one block of ``rows`` reads, so few-channel layers still feed a step a
    cycle (same block RAMs as 8 banks twice as deep). A depthwise step reads ``rows`` pixels' ``cols`` channels,
    a bank each (hw.depthwise_gen); the generator's reads span at most one bank less than a row of them."""
    pow2_at_least = lambda n: 1 << (n - 1).bit_length()  # noqa: E731
    width = max(16, data_width // 8)
    bank_bytes = pow2_at_least(cols)
    return width, bank_bytes, max(pow2_at_least(rows), pow2_at_least(-(-(width + bank_bytes - 1) // bank_bytes)))


class Engine(wiring.Component):
    """See the module docstring. ``rows``, ``cols``, ``rounding``, ``max_col_tiles``, ``ram``, ``dsp``: the core's
    (:class:`hw.accelerator.Accelerator`); ``data_width``: the AXI4 master's (32, 64 or 128 bits);
    ``in_depth``, ``w_depth``, ``out_depth``: the buffers' bytes."""

    def __init__(self, rows=8, cols=8, *, data_width=64, in_depth=32768, w_depth=65536, out_depth=32768,
                 max_col_tiles=64, rounding="double", ram="distributed", dsp="generic", max_burst=16,
                 max_outstanding=4):
        nbytes = data_width // 8 if data_width in (32, 64, 128) else 0
        error = None
        if not nbytes:
            error = f"data_width must be 32, 64 or 128 bits, got {data_width!r}"
        elif not (isinstance(cols, int) and 1 <= cols <= 32 and isinstance(rows, int) and rows >= 1):
            error = f"rows must be >= 1 and cols in [1, 32], got {rows!r}, {cols!r}"
        for name, v in (("in_depth", in_depth), ("w_depth", w_depth), ("out_depth", out_depth)):
            if not (isinstance(v, int) and _pow2(v) and 64 <= v <= 1 << 22):
                error = f"{name} must be a power of two in [64, 4 MiB] bytes, got {v!r}"
        if error:
            self._MustUse__silence = True  # a refused object is not an unused design
            raise ValueError(error)
        self.rows, self.cols, self.data_width = rows, cols, data_width
        self.in_depth, self.w_depth, self.out_depth = in_depth, w_depth, out_depth
        self.max_col_tiles, self.max_burst, self.max_outstanding = max_col_tiles, max_burst, max_outstanding
        # (each table row with its GEMM's output stage, so that a layer is launched before the last one's results are
        # out, whatever their output stages; the core's long delay lines in LUT RAM where there is LUT RAM: beside
        # the engine's parts an ECP5-85F runs short of flip-flops before LUTs)
        self.core = Accelerator(rows, cols, rounding=rounding, max_col_tiles=max_col_tiles, ram=ram, dsp=dsp,
                                row_stage=True, ring_delays=ram == "distributed")
        self.dsp = dsp
        # the buffers' widths: a read of the window generator or a weight word, and a bus beat; the input buffer's
        # banks
        self.in_width, self.bank_bytes, self.banks = input_buffer_shape(rows, cols, data_width)
        self.w_width = max(min(w for w in (4, 8, 16, 32) if w >= cols), nbytes)
        if self.banks * self.bank_bytes > in_depth:
            self._MustUse__silence = True  # a refused object is not an unused design
            raise ValueError(f"in_depth must hold at least one row of the input buffer's banks "
                             f"({self.banks * self.bank_bytes} bytes), got {in_depth}")
        super().__init__({
            "go": In(1), "list_addr": In(32),
            "ro_base": In(32), "ro_limit": In(33), "rw_base": In(32), "rw_limit": In(33),
            "busy": Out(1), "done": Out(1), "barrier": Out(1), "layer_done": Out(1),
            "step": Out(1), "mem_wait": Out(1),
            "error": Out(len(ERRORS)), "error_index": Out(16),
            "bytes_read": Out(32), "bytes_written": Out(32),
            **axi4_read_members(data_width), **axi4_write_members(data_width),
        })

    def elaborate(self, platform):
        m = Module()
        rows, cols = self.rows, self.cols
        m.submodules.core = core = self.core
        nb = self.data_width // 8
        m.submodules.sched = sched = GemmScheduler(max_col_tiles=self.max_col_tiles,
                                                   min_tile_steps=core.min_tile_steps, queue_depth=2, flight_depth=2)
        m.submodules.framer = framer = ResultFramer(rows, n_width=len(sched.counts.n_tiles), depth=2,
                                                    max_col_tiles=self.max_col_tiles)
        m.submodules.reader = reader = AxiReader(self.data_width, max_burst=self.max_burst,
                                                 max_outstanding=self.max_outstanding)
        m.submodules.writer = writer = AxiWriter(self.data_width, max_burst=self.max_burst,
                                                 max_outstanding=self.max_outstanding)
        m.submodules.arbiter = arbiter = ReadArbiter(4, self.data_width)
        m.submodules.fetch = fetch = CommandFetch(self.data_width)
        lanes = self.banks * self.bank_bytes
        m.submodules.check = check = LayerCheck(rows, cols, data_width=self.data_width, in_depth=self.in_depth,
                                                lanes=lanes,
                                                w_depth=self.w_depth, out_depth=self.out_depth,
                                                max_col_tiles=self.max_col_tiles, bank_bytes=self.bank_bytes,
                                                dsp=self.dsp)
        m.submodules.tables = tables = TableLoader(cols, self.max_col_tiles, self.data_width, row_stage=True)
        in_bits, w_bits = (self.in_depth - 1).bit_length(), (self.w_depth - 1).bit_length()
        m.submodules.in_buf = in_buf = ByteBuffer(self.in_width, self.in_depth, lanes=lanes,
                                                  bank_bytes=self.bank_bytes, bank_port=True, dsp=self.dsp)
        m.submodules.w_buf = w_buf = ByteBuffer(self.w_width, self.w_depth, dsp=self.dsp)
        # (the input's loader and the capture write the input buffer in pairs of beats where it is two beats wide: each
        # then takes its write port every other cycle at full rate, so both go at the port's rate together)
        pairs = self.in_width >= 2 * nb
        m.submodules.in_loader = in_loader = Loader(self.data_width, buffer_width=self.in_width, addr_width=in_bits,
                                                    throttle=True, pairs=pairs)
        # the running layer's output, as it is written, also into the input buffer beside its input: the next layer's
        # input when it reads that output (the beats come from the packer, not from memory)
        m.submodules.capture = capture = Loader(self.data_width, buffer_width=self.in_width, addr_width=in_bits,
                                                pairs=pairs)
        # a row-stacked layer's input goes through the stacker (hw.stacker) rather than straight into the buffer
        m.submodules.stacker = stacker = Stacker(self.data_width, buffer_width=self.in_width, addr_width=in_bits)
        # the weights: a run read ahead into the weight buffer's ring (hw.weight_prefetch), many layers' at a time
        m.submodules.w_loader = w_loader = WeightPrefetch(self.data_width, buffer_width=self.w_width,
                                                          addr_width=w_bits)
        m.submodules.gen = gen = WindowGenerator(rows, self.in_width, addr_width=in_bits, dsp=self.dsp)
        m.submodules.dwgen = dwgen = DepthwiseWindows(rows, cols, banks=self.banks, bank_bytes=self.bank_bytes,
                                                      addr_width=in_bits, dsp=self.dsp)
        m.submodules.streamer = streamer = WeightStreamer(cols, buffer_width=self.w_width, addr_width=w_bits)
        m.submodules.packer = packer = ResultPacker(rows, cols, data_width=self.data_width, depth=self.out_depth,
                                                    dsp=self.dsp)

        # --- AXI4: the reader's and the writer's ports are the engine's ---
        for name in axi4_read_members(self.data_width):
            port, inner = getattr(self, name), getattr(reader, name)
            m.d.comb += inner.eq(port) if name in ("m_axi_arready", "m_axi_rid", "m_axi_rdata", "m_axi_rresp",
                                                   "m_axi_rlast", "m_axi_rvalid") else port.eq(inner)
        for name in axi4_write_members(self.data_width):
            port, inner = getattr(self, name), getattr(writer, name)
            m.d.comb += inner.eq(port) if name in ("m_axi_awready", "m_axi_wready", "m_axi_bid", "m_axi_bresp",
                                                   "m_axi_bvalid") else port.eq(inner)
        # every address is checked against its window before it is issued (the fetcher, the layer check); the
        # writer checks the read-write window again, the reader the span of both windows
        # (the reader's span a register: the windows are set before GO, and a comparison less is on its command's
        # check)
        m.d.sync += [reader.win_base.eq(Mux(self.ro_base < self.rw_base, self.ro_base, self.rw_base)),
                     reader.win_limit.eq(Mux(self.ro_limit > self.rw_limit, self.ro_limit, self.rw_limit))]
        m.d.comb += [writer.win_base.eq(self.rw_base), writer.win_limit.eq(self.rw_limit),
                     self.bytes_read.eq(reader.bytes_read), self.bytes_written.eq(writer.bytes_written)]

        # --- the read port's clients: commands, tables, input, weights ---
        # (each client's commands through a two-entry FIFO into the arbiter, and the arbiter's into the reader; the
        # beats too, from the reader to the arbiter and from the arbiter to each client: a FIFO's ready and valid are
        # its level, a register; docs/timing-closure.md, the engine's rows)
        _slice(m, "rd_cmd_slice", arbiter.cmd, reader.cmd)
        _slice(m, "rd_data_slice", reader.data, arbiter.data)
        for c, client in enumerate((fetch, tables, in_loader, w_loader)):
            _slice(m, f"rd_cmd_slice{c}", client.rd_cmd, getattr(arbiter, f"cmd{c}"))
            _slice(m, f"rd_data_slice{c}", getattr(arbiter, f"data{c}"), client.rd_data)
        m.d.comb += [w_buf.w_en.eq(w_loader.w_en), w_buf.w_addr.eq(w_loader.w_addr), w_buf.w_data.eq(w_loader.w_data),
                     w_buf.w_strb.eq(w_loader.w_strb)]
        # the input buffer's write port: the capture's beats first (they come when the writer takes them), the
        # loader's or the stacker's wait (a row-stacked layer's loader gives its beats to the stacker). The loader's
        # and the stacker's writes wait in two-entry queues (hw.write_queue), so the capture's write enable drives
        # the queues alone, not the loader's or the stacker's state; each waits only on its queue's level.
        stack_b = Signal()            # the back's layer is row-stacked
        cap_w = capture.w_en
        m.submodules.in_writes = in_q = WriteQueue(addr_width=in_bits, width=self.in_width)
        m.d.comb += [in_q.i_en.eq(in_loader.w_en & ~stack_b), in_q.i_addr.eq(in_loader.w_addr),
                     in_q.i_data.eq(in_loader.w_data), in_q.i_strb.eq(in_loader.w_strb),
                     in_q.i_filled.eq(in_loader.w_filled), in_q.hold.eq(cap_w), in_q.clear.eq(in_loader.start)]
        # (the write chosen is registered on its way to the buffer, a cycle later: the generators see the writers'
        # `filled` through in_avail, a register too, so a byte is in the buffer before a read of it is asked for)
        m.d.sync += [in_buf.w_en.eq(cap_w | stacker.w_en | in_q.w_en),
                     in_buf.w_addr.eq(Mux(cap_w, capture.w_addr, Mux(stack_b, stacker.w_addr, in_q.w_addr))),
                     in_buf.w_data.eq(Mux(cap_w, capture.w_data, Mux(stack_b, stacker.w_data, in_q.w_data))),
                     in_buf.w_strb.eq(Mux(cap_w, capture.w_strb, Mux(stack_b, stacker.w_strb, in_q.w_strb)))]
        m.d.comb += [in_loader.hold.eq(Mux(stack_b, ~stacker.i_ready, ~in_q.ready)), stacker.hold.eq(cap_w),
                     stacker.i_valid.eq(in_loader.w_en & stack_b), stacker.i_data.eq(in_loader.w_data),
                     in_loader.throttled.eq(stack_b), in_loader.room.eq(stacker.room)]
        for reader_of, buf in ((gen, in_buf), (streamer, w_buf)):
            m.d.comb += [buf.r_en.eq(reader_of.r_en), buf.r_addr.eq(reader_of.r_addr),
                         reader_of.r_data.eq(buf.r_data)]
        m.d.comb += [in_buf.g_en.eq(dwgen.g_en), in_buf.g_rows.eq(dwgen.g_rows), dwgen.g_data.eq(in_buf.g_data)]

        # --- the core: steps from a generator (the window generator's, or the depthwise one's) and the streamer,
        # tables from the loader, results to the packer ---
        dw_b = Signal()               # the back's layer is a DEPTHWISE_CONV_2D
        with m.If(dw_b):
            m.d.comb += [core.act.payload.as_value().eq(dwgen.o.payload), core.act.valid.eq(dwgen.o.valid),
                         dwgen.o.ready.eq(core.act.ready)]
        with m.Else():
            m.d.comb += [core.act.payload.as_value()[:8 * rows].eq(gen.o.payload), core.act.valid.eq(gen.o.valid),
                         gen.o.ready.eq(core.act.ready)]
        m.d.comb += [core.wts.payload.as_value().eq(streamer.o.payload), core.wts.valid.eq(streamer.o.valid),
                     streamer.o.ready.eq(core.wts.ready)]
        # for the performance counters: a step taken; a layer with steps to come took none for want of data
        m.d.comb += [self.step.eq(core.act.valid & core.act.ready),
                     self.mem_wait.eq((gen.busy | dwgen.busy | streamer.busy) & ~(core.act.valid & streamer.o.valid))]
        wiring.connect(m, tables.cfg, core.cfg)
        wiring.connect(m, sched.gemm, core.gemm)
        m.d.comb += sched.check_row.eq(0)     # (the engine places tables itself: the scheduler's row check unused)
        m.d.comb += [framer.res_valid.eq(core.res.valid), core.res.ready.eq(framer.res_ready),
                     framer.tready.eq(packer.res.ready), packer.res.valid.eq(framer.tvalid),
                     packer.res.payload.eq(core.res.payload),
                     framer.push.eq(sched.launched), framer.counts.eq(sched.counts), sched.done.eq(framer.done)]
        # the beats to the writer, and with them to the capture; a kept output's to the capture alone
        d_keep = Signal()             # the drain's layer keeps its output on chip only
        m.d.comb += [writer.data.payload.eq(packer.beats.payload), writer.data.valid.eq(packer.beats.valid & ~d_keep),
                     packer.beats.ready.eq(Mux(d_keep, capture.rd_data.ready, writer.data.ready))]
        capturing = Signal()          # the back's layer's output goes into the input buffer too
        d_capturing = Signal()        # the drain's layer's does
        # (the capture takes each beat a cycle after the writer, from registers: its writes, which every other writer
        # of the input buffer yields to, then depend on no handshake of this cycle. It takes a beat whenever busy,
        # and is busy until its last)
        cap_valid, cap_data = Signal(), Signal(self.data_width)
        m.d.sync += [cap_valid.eq(d_capturing & packer.beats.valid & (d_keep | writer.data.ready)),
                     cap_data.eq(packer.beats.payload.data)]
        m.d.comb += [capture.rd_cmd.ready.eq(0), capture.rd_data.payload.data.eq(cap_data),
                     capture.rd_data.valid.eq(cap_valid)]

        # --- two stages: the front prepares the next command (fetch, check, its table and weights loaded beside
        # the running layer's), the back runs a prepared one (its input, compute, write-back) ---
        cmd_f = Signal(commands.layout())         # the front's command
        index_f = Signal(16)
        tb_f = Signal(range(max(self.max_col_tiles, 2)))    # its table rows' base
        wb_f = Signal(w_bits)                     # its weights' place in the weight buffer (a ring)
        cmd_b = Signal(commands.layout())         # the back's: copies taken at the hand-over
        index_b = Signal(16)
        tb_b, wb_b = Signal.like(tb_f), Signal.like(wb_f)
        vals = {name: Signal(32, name=f"{name}_b") for name in ("k", "n_tiles", "pixels", "m_tiles", "in_len",
                                                                "w_len", "out_len", "in_buf", "out_buf", "khc",
                                                                "shc", "row_bytes", "rp", "odd_w", "out_rp",
                                                                "out_odd_w", "split_h", "split_w")}
        # the drain's layer (its output packed, written and captured), copied from the back's when it starts
        d_out_addr, d_out_c, d_index = Signal(32), Signal(16), Signal(16)
        d_pixels, d_out_len = Signal(32), Signal(32)
        # the place of its output kept on chip (hw.depthwise_gen.InputLayout: split as its command says)
        d_out_h, d_out_w, d_split_h, d_split_w = Signal(16), Signal(16), Signal(), Signal()
        d_rp, d_odd_w = Signal(in_bits), Signal(in_bits)
        m.d.comb += [fetch.list_addr.eq(self.list_addr), fetch.win_base.eq(self.ro_base),
                     fetch.win_limit.eq(self.ro_limit),
                     check.command.eq(cmd_f), check.ro_base.eq(self.ro_base), check.ro_limit.eq(self.ro_limit),
                     check.rw_base.eq(self.rw_base), check.rw_limit.eq(self.rw_limit)]
        m.d.comb += [tables.addr.eq(cmd_f.table_addr), tables.channels.eq(cmd_f.out_c), tables.base.eq(tb_f),
                     tables.stage.output_offset.eq(cmd_f.output_zero_point), tables.stage.act_min.eq(cmd_f.act_min),
                     tables.stage.act_max.eq(cmd_f.act_max),
                     in_loader.addr.eq(cmd_b.input_addr), in_loader.length.eq(vals["in_len"])]
        # every activation in the input buffer is at its pitch (hw.depthwise_gen.input_pitch), from in_base; the
        # output's capture follows the input, at the next 64 bytes
        pitch_b, out_pitch_d = Signal(17), Signal(17)
        in_base, cap_base, d_cap_base = Signal(in_bits), Signal(in_bits), Signal(in_bits)
        forwarded = Signal()          # the back's layer's input is the layer before's output, captured
        fwd_all = Signal()            # ... and all of it is (the layer before's drain has ended)
        # the bytes of the back's input in the buffer, a cycle old (a register between the writers and the
        # generators): within a layer they only grow, so an old value only delays a read; 0 in the layer's first
        # cycle, as the loader starts (below)
        in_avail, in_avail_now = Signal(25), Signal(25)
        m.d.comb += [dw_b.eq(cmd_b.op == commands.OPS["DEPTHWISE_CONV_2D"]),
                     pitch_b.eq(input_pitch(cmd_b.in_c, self.bank_bytes, nb)),
                     out_pitch_d.eq(input_pitch(d_out_c, self.bank_bytes, nb)),
                     cap_base.eq((in_base + vals["in_buf"] + lanes - 1) & ~(lanes - 1)),
                     in_loader.pixel.eq(cmd_b.in_c), in_loader.pitch.eq(pitch_b), in_loader.base.eq(in_base),
                     in_loader.in_h.eq(cmd_b.in_h), in_loader.in_w.eq(cmd_b.in_w),
                     in_loader.split_h.eq(vals["split_h"][0]), in_loader.split_w.eq(vals["split_w"][0]),
                     in_loader.row_bytes.eq(vals["rp"]), in_loader.odd_w.eq(vals["odd_w"]),
                     capture.length.eq(d_out_len), capture.base.eq(d_cap_base),
                     capture.pixel.eq(d_out_c), capture.pitch.eq(out_pitch_d),
                     capture.in_h.eq(d_out_h), capture.in_w.eq(d_out_w), capture.split_h.eq(d_split_h),
                     capture.split_w.eq(d_split_w), capture.row_bytes.eq(d_rp), capture.odd_w.eq(d_odd_w),
                     in_avail_now.eq(Mux(forwarded, Mux(fwd_all, (1 << 25) - 1, capture.filled),
                                         Mux(stack_b, stacker.filled, in_q.filled))),
                     gen.base.eq(in_base), dwgen.base.eq(in_base), stacker.base.eq(in_base)]
        # The weights' run (hw.weight_prefetch): from s_start to s_end in memory, s_start at s_origin in the ring.
        # Places in the run are offsets from s_start (signed: after a restart the back's weights, from the run
        # before, lie just below it). A command whose weights lie in the run at or after s_next (the end of the last
        # command's) takes them there; another restarts the run at its own weights (docs/engine.md, Weights read
        # ahead). The prefetcher may fill the ring up to the oldest weights still needed (`tail`) plus its size.
        s_valid = Signal()
        s_start, s_end, s_next = Signal(32), Signal(34), Signal(34)
        s_origin = Signal(w_bits)
        v_f, v_b = Signal(signed(34)), Signal(signed(34))     # the front's and the back's weights' offsets in the run
        w_len_b = vals["w_len"]
        back_w_loading = Signal()     # the back's layer's weights are not all in the ring yet
        back_starting = Signal()      # the back's START
        # the back's weights in the buffer, a cycle old (as in_avail: they only grow while the layer runs), from its
        # offset: set at the take, so correct from the cycle after START, before the streamer's first test
        w_avail = Signal(25)
        w_have = Signal(signed(35))
        m.d.comb += w_have.eq(w_loader.loaded - v_b)
        m.d.sync += [w_avail.eq(Mux(w_have < 0, 0, Mux(w_have >= (1 << 25) - 1, (1 << 25) - 1, w_have))),
                     back_w_loading.eq(w_loader.loaded < v_b + w_len_b)]
        geometry = {f: cmd_b[f] for f in ("batch", "in_h", "in_w", "in_c", "out_h", "out_w", "kernel_h", "kernel_w",
                                          "stride_h", "stride_w", "dilation_h", "dilation_w", "pad_top", "pad_left")}
        # a row-stacked layer's window generator runs on host.windows.stacked's geometry: out_h rows of in_w pixels of
        # kernel_h * in_c bytes, a 1 x kernel_w filter
        stacked = {"in_h": cmd_b.out_h, "in_c": vals["khc"], "kernel_h": 1, "stride_h": 1, "dilation_h": 1,
                   "pad_top": 0}
        m.d.comb += [stack_b.eq(cmd_b.stack),
                     *(gen.geometry[f].eq(Mux(stack_b, stacked[f], v) if f in stacked else v)
                       for f, v in geometry.items()),
                     gen.geometry.pitch.eq(Mux(stack_b, vals["khc"], pitch_b)),
                     *(stacker.geometry[f].eq(cmd_b[f]) for f in ("batch", "in_h", "in_w", "in_c", "out_h",
                                                                   "kernel_h", "stride_h", "pad_top")),
                     stacker.geometry.zero_point.eq(cmd_b.input_zero_point), stacker.khc.eq(vals["khc"]),
                     stacker.shc.eq(vals["shc"]), stacker.row_bytes.eq(vals["row_bytes"])]
        m.d.comb += [gen.geometry.n_tiles.eq(vals["n_tiles"]),
                     gen.geometry.zero_point.eq(cmd_b.input_zero_point),
                     gen.avail.eq(in_avail), gen.total.eq(vals["in_buf"]),
                     *(dwgen.geometry[f].eq(v) for f, v in geometry.items() if f != "in_c"),
                     dwgen.geometry.depth_multiplier.eq(cmd_b.depth_multiplier),
                     dwgen.geometry.n_tiles.eq(vals["n_tiles"]), dwgen.geometry.zero_point.eq(cmd_b.input_zero_point),
                     dwgen.geometry.pitch.eq(pitch_b), dwgen.geometry.split_h.eq(vals["split_h"][0]),
                     dwgen.geometry.split_w.eq(vals["split_w"][0]), dwgen.avail.eq(in_avail),
                     streamer.k.eq(vals["k"]), streamer.n_tiles.eq(vals["n_tiles"]),
                     streamer.m_tiles.eq(vals["m_tiles"]), streamer.base.eq(wb_b),
                     streamer.avail.eq(w_avail),
                     packer.pixels.eq(d_pixels), packer.channels.eq(d_out_c),
                     writer.cmd.payload.addr.eq(d_out_addr), writer.cmd.payload.length.eq(d_out_len)]
        desc = sched.desc
        m.d.comb += [desc.k.eq(vals["k"]), desc.n_tiles.eq(vals["n_tiles"]), desc.base.eq(tb_b),
                     desc.end.eq(tb_b + vals["n_tiles"]), desc.depthwise.eq(dw_b), desc.m_m1.eq(vals["m_tiles"] - 1),
                     desc.n_m1.eq(vals["n_tiles"] - 1), desc.m_one.eq(vals["m_tiles"] == 1),
                     desc.n_one.eq(vals["n_tiles"] == 1), desc.output_offset.eq(cmd_b.output_zero_point),
                     desc.act_min.eq(cmd_b.act_min), desc.act_max.eq(cmd_b.act_max), desc.bypass.eq(0),
                     desc.same_output.eq(1)]

        bus_error = Signal()
        m.d.sync += [self.done.eq(0), self.barrier.eq(0), self.layer_done.eq(0)]
        # the fetcher reads ahead: its END or BARRIER is kept for when the layers before it are done
        list_end, list_barrier = Signal(), Signal()
        with m.If(fetch.done):
            m.d.sync += list_end.eq(1)
        with m.If(fetch.barrier):
            m.d.sync += list_barrier.eq(1)
        begin = Signal()              # GO taken
        finish = Signal()             # the stop completes
        halt = Signal()               # a layer ended with a bus error: prepare nothing more
        front_error = Signal(len(ERRORS))
        front_index = Signal(16)
        # Past a BARRIER the front goes on: the fetcher resumes after it (`resume`) and the next command is fetched,
        # checked, and its table and weights loaded (read-only data the host does not change; the weights once the
        # back is idle, WEIGHTS_WAIT) while the commands before the barrier finish and while the host runs its ops;
        # the back takes it only after the GO that resumes (`fence`, and `fence_r` a cycle longer: `fwd` is a
        # register of `last_valid`, which that GO clears). An error of a command past the barrier (index from
        # `fence_first` on) waits for that GO.
        fence, fence_r, resume = Signal(), Signal(), Signal()
        front_fetching = Signal()     # the front waits for a command from the fetcher
        fence_first = Signal(16)
        m.d.sync += [fence_r.eq(fence), resume.eq(0)]
        # The first error response stops the list at once (no command is taken after it; the ones taken
        # complete) and names its command: a write's is the draining layer's, a read's the layer loading its
        # input if one is, else the command being prepared (its table or weights).
        write_error = Signal()
        m.d.comb += write_error.eq(writer.bresp_error | writer.error.any())
        with m.If((write_error | reader.rresp_error | reader.error.any()) & ~bus_error):
            m.d.sync += [bus_error.eq(1), halt.eq(1), front_error.eq(1 << ERRORS["BUS"])]
            # (past a fence no layer before it reads: a read is the command being fetched, or the one prepared)
            m.d.sync += front_index.eq(Mux(write_error, d_index,
                                           Mux(fence, Mux(front_fetching, fetch.desc.payload.index, index_f),
                                               Mux(in_loader.busy, index_b, index_f))))

        # --- the front ---
        back_idle = Signal()
        ready = Signal()              # the front holds a prepared command
        take = Signal()               # the back takes it
        nt_f = check.n_tiles
        # the front's table rows: after the back's, wrapping at the last row where the rows are a power of two (the
        # core's and the table loader's row addresses wrap there: a ring, like the weights'); else after the back's or
        # before them
        after, before = Signal(), Signal()
        t_ring = _pow2(self.max_col_tiles)
        if t_ring:
            m.d.comb += [after.eq(vals["n_tiles"] + nt_f <= self.max_col_tiles), before.eq(0)]
        else:
            m.d.comb += [after.eq(tb_b + vals["n_tiles"] + nt_f <= self.max_col_tiles), before.eq(nt_f <= tb_b)]
        # the front's command's weights in the run (else the run restarts at them), and the run's end if it does:
        # this command's weights and the later ones its weights_ahead names, whole beats, within the read-only window
        # (registers, used from PLACE's second cycle, as the placement's)
        in_run = Signal()
        w_end_f, ahead_end, ro_end = Signal(34), Signal(34), Signal(34)
        m.d.comb += ro_end.eq(self.ro_limit & ~(nb - 1))
        m.d.sync += [w_end_f.eq(cmd_f.weights_addr + check.w_len),
                     in_run.eq(s_valid & (cmd_f.weights_addr >= s_next) & (w_end_f <= s_end)),
                     ahead_end.eq(w_end_f + (cmd_f.weights_ahead & ~(nb - 1)))]
        restart_f = Signal()          # the front's command restarts the run
        # the core's GEMMs queued or in flight are the back's layer's at most: a layer still draining has all its
        # result rows out of the core, so its table rows are free
        tables_free = Signal()
        m.d.comb += tables_free.eq(sched.queued + sched.in_flight <= ~back_idle)
        # The placement's decision and its rows are registers, computed every cycle and used only after a cycle in
        # PLACE. In PLACE a cycle-old
        # value is safe: the back can only become idle there (it takes a command only from READY), the tables and
        # weights loaders only end, and the core's GEMMs only complete, so the decision is at worst a cycle late,
        # and its rows are computed from the same values as the decision.
        place_ok, placed = Signal(), Signal()
        tb_place, wb_place = Signal.like(tb_f), Signal.like(wb_f)
        # (a restart waits for the back's weights to be all in the ring, and for the run before to stop: its beats
        # asked for land first; it then starts after the back's weights)
        restart_ok = Signal()
        m.d.sync += [place_ok.eq(~tables.busy & tables_free & (back_idle | after | before)),
                     restart_ok.eq(~w_loader.busy & (back_idle | ~back_w_loading)),
                     tb_place.eq(Mux(back_idle | ~after, 0, (tb_b + vals["n_tiles"])[:len(tb_f)] if t_ring
                                     else tb_b + vals["n_tiles"])),
                     wb_place.eq(Mux(back_idle, 0, wb_b + w_len_b))]
        with m.FSM(name="front") as front:
            with m.State("IDLE"), m.If(begin):
                m.next = "FETCH"
            with m.State("FETCH"):
                with m.If(halt):
                    m.next = "END"
                with m.Elif(fetch.desc.valid):
                    m.d.sync += [cmd_f.eq(fetch.desc.payload.command), index_f.eq(fetch.desc.payload.index)]
                    m.next = "CHECK_START"
                with m.Elif(list_barrier & ~list_end & ~fence):
                    # (once the layers before the barrier have read their inputs and weights: a read error after
                    # that is the prepared command's, and those reads keep the port meanwhile. The fetcher stopped
                    # at the barrier, its index the next command's)
                    # (not in the back's START: its loader is busy and its weights' test current from the next cycle)
                    reads_done = ~in_loader.busy & ~back_w_loading & ~back_starting
                    m.d.sync += [fence.eq(reads_done), fence_first.eq(fetch.desc.payload.index),
                                 list_barrier.eq(~reads_done), resume.eq(reads_done)]
                with m.Elif(list_end | list_barrier):
                    m.next = "END"
                with m.Elif(fetch.error.any()):
                    m.d.sync += [front_error.eq(fetch.error), front_index.eq(fetch.error_index)]
                    m.next = "END"
            with m.State("CHECK_START"):
                m.next = "CHECK"
            with m.State("CHECK"), m.If(check.done):
                with m.If(halt):
                    m.next = "END"
                with m.Elif(check.error.any()):
                    m.d.sync += [front_error.eq(check.error << len(FETCH_ERRORS)), front_index.eq(index_f)]
                    m.next = "END"
                with m.Else():
                    m.next = "PLACE"
            with m.State("PLACE"):
                # its table rows and weights beside the running layer's, or wait for that layer to end
                with m.If(halt):
                    m.next = "END"
                with m.Elif(placed & place_ok & (in_run | restart_ok)):
                    m.d.sync += [tb_f.eq(tb_place), restart_f.eq(~in_run), s_next.eq(w_end_f)]
                    with m.If(in_run):
                        m.d.sync += [v_f.eq(cmd_f.weights_addr - s_start),
                                     wb_f.eq(s_origin + (cmd_f.weights_addr - s_start)[:w_bits])]
                    with m.Else():
                        # the run restarts at this command's weights, after the back's in the ring: the back's
                        # then lie just below the new run's start
                        m.d.sync += [v_f.eq(0), wb_f.eq(wb_place), s_valid.eq(1), s_start.eq(cmd_f.weights_addr),
                                     s_end.eq(Mux(ahead_end > ro_end, ro_end, ahead_end)), s_origin.eq(wb_place),
                                     v_b.eq(-w_len_b)]
                    m.next = "TABLE_START"
            with m.State("TABLE_START"):
                # the table's read first, then the weights' (the command is ready once the table is in)
                m.next = "WEIGHTS_WAIT"
            with m.State("WEIGHTS_WAIT"):
                # (a run restarted past a fence only once the layers before the barrier have taken their last step:
                # their output writes share the memory with these reads, and the weights stream behind the steps
                # after the GO anyway)
                with m.If(halt):
                    m.next = "END"
                with m.Elif(~restart_f):
                    m.next = "TABLE"
                with m.Elif(~fence | back_idle):
                    m.next = "WEIGHTS_START"
            with m.State("WEIGHTS_START"):
                m.next = "TABLE"
            with m.State("TABLE"), m.If(~tables.busy):
                m.next = "READY"
            with m.State("READY"):
                with m.If(halt):
                    m.next = "END"
                with m.Elif(take):
                    m.next = "FETCH"
            with m.State("END"), m.If(finish):
                m.next = "IDLE"
        front_end = front.ongoing("END")
        m.d.comb += front_fetching.eq(front.ongoing("FETCH"))
        m.d.sync += placed.eq(front.ongoing("PLACE"))
        # (the FSMs' outputs are expressions of their states, never values set inside a state: Icarus does not run
        # the always block such a value becomes while the state keeps its initial value, and leaves it X)
        m.d.comb += [fetch.desc.ready.eq(front.ongoing("FETCH") & ~halt), check.start.eq(front.ongoing("CHECK_START")),
                     tables.start.eq(front.ongoing("TABLE_START")), w_loader.start.eq(front.ongoing("WEIGHTS_START")),
                     w_loader.addr.eq(s_start), w_loader.length.eq(s_end - s_start), w_loader.base.eq(s_origin),
                     ready.eq(front.ongoing("READY") & ~halt & ~fence & ~fence_r)]
        # the run's tail: the back's weights while it runs, else the front's placed command's, else the next
        # command's earliest (only grows within a run, so the limit may be a register); the run stops at the list's
        # end or a halt, and at a restart, once the back's weights are all in
        holds = Signal()
        m.d.comb += holds.eq(front.ongoing("TABLE_START") | front.ongoing("WEIGHTS_WAIT")
                             | front.ongoing("WEIGHTS_START") | front.ongoing("TABLE") | front.ongoing("READY"))
        tail = Signal(signed(35))
        m.d.comb += tail.eq(Mux(~back_idle, v_b, Mux(holds, v_f, s_next - s_start)))
        m.d.sync += w_loader.limit.eq(tail + self.w_depth)
        # past the weights a layer waits for (the prepared command's, else the running one's), the run reads lazily:
        # a burst at a time, so that the running layer's input reads wait behind one burst of it at most, and only
        # when no other client asks
        need = Signal(signed(35))
        m.d.comb += need.eq(Mux(holds, v_f + check.w_len, Mux(~back_idle, v_b + w_len_b, 0)))
        m.d.sync += w_loader.lazy.eq(w_loader.asked >= need)
        # (and its commands past that yield the read port to every other client's: hw.read_arbiter's low priority,
        # judged by the command at the arbiter, which its FIFO may hold from before the layer's need grew)
        ahead_of = Signal(signed(35))
        m.d.comb += ahead_of.eq(arbiter.cmd3.payload.addr - s_start)
        m.d.sync += arbiter.low.eq(Mux(ahead_of >= need, 0b1000, 0))
        # (not in the back's START: its weights' test is the last layer's until the next cycle)
        m.d.comb += w_loader.abort.eq((front_end | halt | (front.ongoing("PLACE") & placed & ~in_run))
                                      & (back_idle | (~back_w_loading & ~back_starting)))

        # --- the back: the layer's input, steps and weights; then the drain: its output packed, written, captured.
        # The back takes the next layer once its layer's steps are all taken and the drain has started that layer,
        # so the next layer's set-up and first steps overlap the last one's results and write-back. ---
        pending = Signal()            # the back's layer is not in the drain yet
        last_valid = Signal()         # the back's layer (or the last one it ran) captures its output
        drain_idle, drain_end = Signal(), Signal()
        cap_free = Signal()           # the drain's capture is not writing where the front's input would go
        d_cap_wraps = Signal()        # the drain's capture runs past the input buffer's end (and on from its start)
        fwd = Signal()                # the front's command reads the back's layer's output, captured
        # (a split output's layout depends on its shape, not its bytes alone: then the shapes must be equal too)
        m.d.sync += fwd.eq(last_valid & (cmd_f.input_addr == cmd_b.output_addr) & (cmd_f.in_c == cmd_b.out_c)
                           & (check.in_buf == vals["out_buf"]) & ~cmd_f.stack
                           & (check.split_h == cmd_b.out_split_h) & (check.split_w == cmd_b.out_split_w)
                           & ((~cmd_b.out_split_h & ~cmd_b.out_split_w)
                              | ((cmd_f.in_h == cmd_b.out_h) & (cmd_f.in_w == cmd_b.out_w)
                                 & (cmd_f.batch == cmd_b.batch))))
        # a layer that reads its input from memory where the draining layer is still writing waits for the drain to
        # end (read after write: its output is in memory only once its write responses are in)
        in_end_f, d_out_end = Signal(33), Signal(33)
        m.d.sync += in_end_f.eq(cmd_f.input_addr + check.in_len)
        mem_hazard = Signal()
        m.d.sync += mem_hazard.eq(~drain_idle & (cmd_f.input_addr < d_out_end) & (d_out_addr < in_end_f))
        steps_done = Signal()
        # (the input's last writes in the buffer too: a layer that reads only part of its input may end first)
        m.d.comb += steps_done.eq(~gen.busy & ~dwgen.busy & ~streamer.busy & ~in_loader.busy & ~stacker.busy
                                  & ~in_q.w_en & ~back_w_loading)
        with m.FSM(name="back") as back:
            # (a layer that does not read the captured output waits for the capture to end: its input's load
            # would share the input buffer with it)
            with m.State("IDLE"), m.If(take):
                m.d.sync += [cmd_b.eq(cmd_f), index_b.eq(index_f), tb_b.eq(tb_f), wb_b.eq(wb_f), v_b.eq(v_f),
                             *(vals[name].eq(getattr(check, name)) for name in vals),
                             forwarded.eq(fwd), in_base.eq(Mux(fwd, cap_base, 0)),
                             fwd_all.eq(drain_idle | drain_end),
                             capturing.eq(check.capture)]
                m.next = "START"
            with m.State("START"):
                m.d.sync += [pending.eq(1), last_valid.eq(capturing)]
                m.next = "RUN"
            with m.State("RUN"), m.If(steps_done):
                m.next = "IDLE"
        starting = back.ongoing("START")
        m.d.comb += back_starting.eq(starting)
        m.d.sync += in_avail.eq(Mux(starting, 0, in_avail_now))
        # (fwd, cap_free and mem_hazard are registers a cycle old. A take needs them computed from what holds now:
        # the front's command, the check's sizes and the back's command hold while the front is READY and the back
        # IDLE, and the drain's layer changes only as it takes `pending`, hence `pending` low a cycle ago too.
        # Otherwise the drain only moves them towards a take: its capture ends, it ends)
        was_pending = Signal()
        m.d.sync += was_pending.eq(pending)
        m.d.comb += [back_idle.eq(back.ongoing("IDLE")),
                     take.eq(back.ongoing("IDLE") & ready & ~pending & ~was_pending
                             & (fwd | (cap_free & ~mem_hazard))),
                     in_loader.start.eq(starting & ~forwarded), stacker.start.eq(starting & stack_b),
                     sched.push.eq(starting),
                     gen.start.eq(starting & ~dw_b), dwgen.start.eq(starting & dw_b), streamer.start.eq(starting)]

        written = Signal()            # the drain's write command is taken
        with m.FSM(name="drain") as drain:
            with m.State("IDLE"), m.If(pending):
                m.d.sync += [pending.eq(0), d_out_addr.eq(cmd_b.output_addr), d_out_c.eq(cmd_b.out_c),
                             d_out_end.eq(cmd_b.output_addr + vals["out_len"]),
                             d_index.eq(index_b), d_pixels.eq(vals["pixels"]), d_out_len.eq(vals["out_len"]),
                             d_cap_base.eq(cap_base), d_capturing.eq(capturing), d_keep.eq(cmd_b.keep),
                             d_out_h.eq(cmd_b.out_h), d_out_w.eq(cmd_b.out_w), d_split_h.eq(cmd_b.out_split_h),
                             d_split_w.eq(cmd_b.out_split_w), d_rp.eq(vals["out_rp"]), d_odd_w.eq(vals["out_odd_w"]),
                             d_cap_wraps.eq(cap_base + vals["out_buf"] > self.in_depth)]
                m.next = "START"
            with m.State("START"):
                m.next = "RUN"
            with m.State("RUN"):
                # the output is written as its row tiles complete: one write command for the whole tensor (none for
                # an output kept on chip only)
                with m.If((writer.cmd.valid & writer.cmd.ready) | d_keep):
                    m.d.sync += written.eq(1)
                with m.If(drain_end):
                    m.d.sync += [written.eq(0), self.layer_done.eq(1), fwd_all.eq(1)]
                    m.next = "IDLE"
        m.d.comb += drain_idle.eq(drain.ongoing("IDLE") & ~pending)
        m.d.sync += [
                     # (or its input, loaded from the buffer's byte 0, ends before the capture's place, and the
                     # capture does not wrap past the buffer's end to its start)
                     cap_free.eq(drain_idle | ~d_capturing | (drain.ongoing("RUN") & ~capture.busy)
                                 | ((check.in_buf <= d_cap_base) & ~d_cap_wraps))]
        m.d.comb += [drain_end.eq(drain.ongoing("RUN") & written & ~packer.busy & writer.idle & ~capture.busy),
                     packer.start.eq(drain.ongoing("START")), capture.start.eq(drain.ongoing("START") & d_capturing),
                     writer.cmd.valid.eq(drain.ongoing("RUN") & ~written & ~d_keep)]

        # --- GO, and the stop once the back is idle and the front has ended (or halted with its loads done) ---
        own_error = Signal()          # an error of a command before the barrier the front has passed (or no fence)
        m.d.comb += own_error.eq((front_error != 0) & (~fence | (front_index < fence_first)))
        with m.FSM(name="control") as control:
            with m.State("IDLE"), m.If(self.go):
                # (GO again: the host may have changed memory, so no output of the last list is taken as captured.
                # Resuming past a fence, what the front found after the barrier stays: its flags and errors)
                m.d.sync += [self.busy.eq(1), self.error.eq(0), last_valid.eq(0), fence.eq(0)]
                with m.If(~fence):
                    m.d.sync += [bus_error.eq(0), list_end.eq(0), list_barrier.eq(0), halt.eq(0), front_error.eq(0),
                                 s_valid.eq(0)]
                m.next = "ACTIVE"
            with m.State("ACTIVE"):
                with m.If(back_idle & drain_idle & fence & ~own_error):
                    # the commands before the barrier done: stop there, the front going on (no stop of the fetcher)
                    m.d.sync += [self.busy.eq(0), self.barrier.eq(1), self.error.eq(0)]
                    m.next = "IDLE"
                with m.Elif(back_idle & drain_idle & ~ready & front_end & ~tables.busy & ~w_loader.busy):
                    m.d.sync += [self.error.eq(front_error), self.error_index.eq(front_index), fence.eq(0)]
                    m.next = "STOP"
            # STOP: the fetcher may be reading ahead: stop it (its read completes); busy falls only then, with the
            # stop's pulse (a GO before it would be lost)
            with m.State("STOP"), m.If(~fetch.busy):
                m.d.sync += [self.busy.eq(0), self.done.eq(list_end & (self.error == 0)),
                             self.barrier.eq(list_barrier & ~list_end & (self.error == 0))]
                m.next = "IDLE"
        m.d.comb += [begin.eq(control.ongoing("IDLE") & self.go), fetch.go.eq((begin & ~fence) | resume),
                     fetch.stop.eq(control.ongoing("STOP")), finish.eq(control.ongoing("STOP") & ~fetch.busy)]
        return m


def _slice(m, name, source, sink):
    """``source`` to ``sink`` (streams of one layout) through a two-entry FIFO: a register stage that keeps the full
    rate, ``source``'s ready being the FIFO's level."""
    width = len(source.payload.as_value())
    m.submodules[name] = q = fifo.SyncFIFO(width=width, depth=2)
    m.d.comb += [q.w_en.eq(source.valid), q.w_data.eq(source.payload.as_value()), source.ready.eq(q.w_rdy),
                 sink.valid.eq(q.r_rdy), sink.payload.as_value().eq(q.r_data), q.r_en.eq(sink.ready)]
