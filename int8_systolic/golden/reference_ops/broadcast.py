"""Broadcasting as TFLite's binary kernels do it: numpy's rules, up to a maximum rank per kernel."""

import numpy as np

__all__ = ["check_broadcast"]


def check_broadcast(ctx, max_rank, inputs=(0, 1), output=0):
    """Check that the inputs broadcast to the output tensor's shape; return that shape.

    ``max_rank`` is the largest rank TFLM's broadcasting kernel handles (``BroadcastAdd6DSlow``:
    6, ``Broadcast4DSlow...``: 4); equal shapes take the element-wise path at any rank.
    """
    shapes = [ctx.tensor(i).shape for i in inputs]
    try:
        out = np.broadcast_shapes(*shapes)
    except ValueError:
        ctx.fail(f"input shapes {' and '.join(str(list(s)) for s in shapes)} do not broadcast")
    declared = ctx.tensor(output, output=True).shape
    if tuple(out) != tuple(declared):
        ctx.fail(f"inputs {' and '.join(str(list(s)) for s in shapes)} broadcast to {list(out)} but output "
                 f"'{ctx.outputs[output].name}' is {list(declared)}")
    if len({tuple(s) for s in shapes}) > 1 and len(out) > max_rank:
        ctx.fail(f"broadcasting {len(out)}-D tensors: TFLM's {ctx.op} broadcasts up to {max_rank} dimensions")
    return tuple(out)
