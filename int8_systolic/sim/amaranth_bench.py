"""Run a GEMM through the accelerator in Amaranth's own simulator at full rate (for `make bench`)."""

import time

from amaranth.sim import Simulator

__all__ = ["load_layer", "offer_step", "run_full_rate", "set_layer_registers", "simulate", "write_tables"]


def simulate(dut, *testbenches, vcd=None):
    """Run ``testbenches`` (async functions of ``ctx``) on ``dut`` with a 100 MHz clock until they return
    (a VCD of the run to ``vcd``, a path, if given)."""
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for bench in testbenches:
        sim.add_testbench(bench)
    if vcd is None:
        sim.run()
    else:
        with sim.write_vcd(str(vcd)):
            sim.run()


async def write_tables(ctx, dut, problem):
    """Write ``problem``'s per-channel table entries on ``cfg``, one a cycle."""
    ctx.set(dut.cfg.valid, 1)
    for addr, lane, bias, mult, shift in problem.table_writes(dut.rows, dut.cols):
        ctx.set(dut.cfg.payload, {"addr": addr, "lane": lane,
                                  "entry": {"bias": bias, "multiplier": mult, "shift": shift}})
        await ctx.tick()
    ctx.set(dut.cfg.valid, 0)


def set_layer_registers(ctx, dut, problem):
    """Drive the per-layer settings (``gemm.settings``: ``k_steps``, ``n_tiles``, ...) with ``problem``'s values."""
    ctx.set(dut.gemm.settings, {**problem.layer_registers(dut.rows, dut.cols), "table_base": 0})


async def load_layer(ctx, dut, problem):
    """Set the layer registers, wait two cycles, write the tables: the first step may then come in
    the next cycle (the registers three cycles before it, with at least one table write)."""
    set_layer_registers(ctx, dut, problem)
    await ctx.tick()
    await ctx.tick()
    await write_tables(ctx, dut, problem)


def offer_step(ctx, dut, steps, i):
    """Present step ``i`` of ``steps`` on ``act`` and ``wts`` (neither valid past the last one);
    return whether a step is offered."""
    live = i < len(steps)
    if live:
        ctx.set(dut.act.payload, steps[i][0])
        ctx.set(dut.wts.payload, steps[i][1])
    ctx.set(dut.act.valid, live)
    ctx.set(dut.wts.valid, live)
    return live


def run_full_rate(problem, dut):
    """Stream ``problem`` through ``dut`` (an :class:`Accelerator`) with no gaps and no backpressure.

    Returns ``(result_rows, cycles, sim_cycles, seconds)``: the result rows in arrival order,
    the cycles from the first input accepted to the last output (both included), every
    simulated cycle, and the wall-clock seconds of the simulation.
    """
    rows, cols = dut.rows, dut.cols
    problem.check_fits(rows, cols, dut.max_col_tiles)
    steps = list(problem.steps(rows, cols))
    want = problem.n_result_rows(rows, cols)
    results, marks = [], {}

    async def testbench(ctx):
        ctx.set(dut.res.ready, 1)
        await load_layer(ctx, dut, problem)
        cycle, i = 0, 0
        # (a stuck sequencer or FIFO fails here instead of hanging: at full rate a GEMM takes
        # Accelerator.cycles(), and this allows twice that and more)
        budget = 2 * dut.cycles(*problem.shape) + 100
        while len(results) < want:
            if cycle > budget:
                raise AssertionError(f"no progress: {len(results)} of {want} result rows after {cycle} cycles "
                                     f"(Accelerator.cycles() = {dut.cycles(*problem.shape)})")
            live = offer_step(ctx, dut, steps, i)
            _, _, ready, valid, payload = await ctx.tick().sample(dut.act.ready, dut.res.valid, dut.res.payload)
            if live and ready:
                marks.setdefault("first", cycle)
                i += 1
            if valid:
                results.append([int(payload[j]) for j in range(cols)])
                marks["last"] = cycle
            cycle += 1
        marks["total"] = cycle + len(problem.table_writes(rows, cols))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    t0 = time.perf_counter()
    sim.run()
    seconds = time.perf_counter() - t0
    return results, marks["last"] - marks["first"] + 1, marks["total"], seconds
