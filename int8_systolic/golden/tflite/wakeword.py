"""The pretrained microWakeWord models shipped by ``pymicro-wakeword`` and realistic inputs for them.

:func:`wakeword_models` lists the four int8 streaming models. :func:`feature_windows`
turns a synthetic 16 kHz utterance (a seeded mix of voiced harmonics with a moving pitch,
noise bursts and silences) into the model's input windows exactly as pymicro-wakeword
does: TFLM's audio front end (``pymicro-features``), ``stride`` feature frames per
window, quantized with the input tensor's scale and zero point.
"""

import pathlib

import numpy as np

__all__ = ["feature_windows", "wakeword_models"]


def wakeword_models():
    """Paths of the bundled .tflite models (alexa, hey_jarvis, hey_mycroft, okay_nabu)."""
    try:
        import pymicro_wakeword
    except ImportError as exc:
        raise RuntimeError("pymicro-wakeword is not installed: run `make install`") from exc
    return sorted((pathlib.Path(pymicro_wakeword.__file__).parent / "models").glob("*.tflite"))


def synthetic_audio(seconds, seed):
    """int16 mono 16 kHz: harmonic 'vowels' with gliding pitch, consonant-like noise, pauses."""
    rng = np.random.default_rng(seed)
    rate = 16000
    out = []
    while sum(len(x) for x in out) < seconds * rate:
        n = int(rng.integers(rate // 20, rate // 4))
        kind = rng.choice(["vowel", "noise", "silence"], p=[0.6, 0.25, 0.15])
        t = np.arange(n) / rate
        if kind == "vowel":
            f0 = rng.uniform(90, 260) * (1 + rng.uniform(-0.3, 0.3) * t / t[-1])
            phase = 2 * np.pi * np.cumsum(f0) / rate
            seg = sum(rng.uniform(0.2, 1.0) / k * np.sin(k * phase) for k in range(1, 12))
        elif kind == "noise":
            seg = rng.normal(0, 0.4, n) * np.hanning(n)
        else:
            seg = rng.normal(0, 0.003, n)
        out.append(seg * rng.uniform(0.1, 0.9))
    audio = np.concatenate(out)[: seconds * rate]
    return (np.clip(audio / max(1e-9, np.abs(audio).max()), -1, 1) * 20000).astype(np.int16)


def feature_windows(input_shape, scale, zero_point, steps, seed=0):
    """``steps`` int8 input windows of shape ``input_shape`` ([1, stride, 40])."""
    from pymicro_wakeword.microwakeword import MicroWakeWordFeatures

    stride = int(input_shape[1])
    frames = []
    frontend = MicroWakeWordFeatures()
    seconds = 1
    while len(frames) < steps * stride:
        frontend.reset()
        frames = list(frontend.process_streaming(synthetic_audio(seconds, seed).tobytes()))
        seconds *= 2
    windows = []
    for i in range(steps):
        feats = np.concatenate(frames[i * stride:(i + 1) * stride], axis=1)
        q = np.round(feats / float(scale) + int(zero_point))
        windows.append(np.clip(q, -128, 127).astype(np.int8).reshape(input_shape))
    return windows
