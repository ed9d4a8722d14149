"""Candidate kernels for narrow (int8 / bf16) FlowLM linears, side by side in one process.

One "pass" applies every attention and feed-forward linear of a FlowLM transformer (in_proj
3072×1024, out_proj 1024×1024, linear1 4096×1024, linear2 1024×4096 per layer; 6 or 24 layers,
random weights) to inputs of n rows — what one step (n = 1) or a batched step of n sequences
reads. The weights of a pass exceed the CPU caches, so the figures are memory-bound like a step.

Candidates (each skipped with a note when its library is missing):
- ``numpy-fp32``: ``x @ W.T`` (BLAS), the baseline;
- ``numpy-bf16-widen`` / ``numpy-int8-widen``: narrow storage widened to fp32 per call, NumPy only;
- ``numba-int8`` (one scale per row, four distant rows per pass: ``int8_matmul``, on an AVX2
  host the int16-activation kernel), ``numba-int8-float`` (the same weights widened to float32
  in registers: what other CPUs run), ``numba-bf16`` and ``numba-fp32`` (the fp32 weight, four
  distant rows, x rows in pairs): this package's kernels;
- candidates not kept: ``numba-int8-unwidened`` (the float kernel without its widening of the
  weight rows for batched steps), ``numba-int8-g64-serial`` (a scale per 64 inputs, one row after
  another: the first kernel), ``numba-int8-row-serial`` (one scale per row, one row after
  another) and ``numba-int8-x16`` (int16 activations, integer multiply-adds as a numba loop, one
  row after another, a scale per 64 inputs);
- ``ort-nbits8``: ONNX Runtime ``MatMulNBits`` (bits 8, block 64; weight-only), one session per
  linear shape; ``ort-dynq``: ``DynamicQuantizeMatMul`` (int8 activations and weights, like
  upstream's torch dynamic int8).

Also: the int8 kernel's rate with its weight in L2 against streamed from DRAM (equal rates:
bound by instructions, not bandwidth), cold start (numba compile with an empty cache and from
the cache, in child processes; ORT session creation for all linears of a model) and the error
of each int8 layout against fp32 (signal-to-error in dB on the outputs).

    python -m benchmarks.micro.narrow_kernels [--layers 6 24] [--rows 1 2 4 8 16] [--threads 1]

The numba kernels are serial (one thread) at any ``--threads``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable

from benchmarks.common import REPO, cap_blas_threads, module_command


def _threads_from_argv() -> str:
    """--threads N caps BLAS and ONNX Runtime threads; set before NumPy is imported."""
    argv = sys.argv
    return argv[argv.index("--threads") + 1] if "--threads" in argv[:-1] else "1"


cap_blas_threads(int(_threads_from_argv()))
# The kernels module is loaded here by path under another name: keep its compiled cache apart
# from the package's own (numba keys cache entries by file).
os.environ.setdefault("NUMBA_CACHE_DIR", os.path.join(tempfile.gettempdir(), "bench_narrow_numba"))

import numpy as np  # noqa: E402

SHAPES = [(3072, 1024), (1024, 1024), (4096, 1024), (1024, 4096)]  # [out, in] per layer
GROUP = 64


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[6, 24])
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--threads", type=int, default=1, help="BLAS / ORT threads")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--child", choices=("numba-compile",), help=argparse.SUPPRESS)
    return parser.parse_args()


def quantize(w: np.ndarray, group: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 with one scale per row (group None) or per group of inputs."""
    m, k = w.shape
    groups = 1 if group is None else k // group
    blocks = w.reshape(m, groups, -1)
    scale = np.abs(blocks).max(axis=2) / 127.0
    scale[scale == 0] = 1.0
    q = np.clip(np.rint(blocks / scale[..., None]), -127, 127).astype(np.int8)
    return q.reshape(m, k), scale.astype(np.float32)


def bf16_bits(w: np.ndarray) -> np.ndarray:
    bits = w.view(np.uint32)
    rounded = bits + np.uint32(0x7FFF) + ((bits >> 16) & 1)
    return (rounded >> 16).astype(np.uint16)


def snr_db(ref: np.ndarray, got: np.ndarray) -> float:
    return float(10 * np.log10(np.sum(ref.astype(np.float64) ** 2) / np.sum((ref - got) ** 2)))


def timed(fn: Callable[[], object], repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


class Candidates:
    """Weights of one model in every layout, and one pass function per candidate."""

    def __init__(self, layers: int, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.fp32 = [
            (rng.standard_normal(s, dtype=np.float32) / np.sqrt(s[1])).astype(np.float32)
            for _ in range(layers)
            for s in SHAPES
        ]
        self.q_group = [quantize(w, GROUP) for w in self.fp32]
        self.q_row = [quantize(w, None) for w in self.fp32]
        self.q_row_1d = [(q, s[:, 0].copy()) for q, s in self.q_row]  # the package's layout
        self.bf16 = [bf16_bits(w) for w in self.fp32]
        self.ort: dict[str, list] = {}

    def passes(self, threads: int) -> dict[str, Callable[[dict], list[np.ndarray]]]:
        out: dict[str, Callable[[dict], list[np.ndarray]]] = {
            "numpy-fp32": lambda xs: [xs[w.shape[1]] @ w.T for w in self.fp32],
            "numpy-bf16-widen": lambda xs: [
                xs[b.shape[1]] @ (b.astype(np.uint32) << 16).view(np.float32).T for b in self.bf16
            ],
            "numpy-int8-widen": lambda xs: [
                (xs[q.shape[1]] @ q.T.astype(np.float32)) * s[:, 0] for q, s in self.q_row
            ],
        }
        try:
            kernels = load_kernels()
        except ImportError as exc:
            print(f"  (numba candidates skipped: {exc})")
        else:

            def run(kernel, weights, xs, with_scale=True):
                results = []
                for q, s in weights:
                    x = xs[q.shape[1]]
                    o = np.empty((x.shape[0], q.shape[0]), np.float32)
                    kernel(x, q, s, o) if with_scale else kernel(x, q, o)
                    results.append(o)
                return results

            out["numba-int8"] = lambda xs: run(kernels.int8_matmul, self.q_row_1d, xs)
            out["numba-int8-float"] = lambda xs: run(kernels.int8_matmul_float, self.q_row_1d, xs)
            unwidened = four_row_int8_kernel()
            out["numba-int8-unwidened"] = lambda xs: run(unwidened, self.q_row_1d, xs)
            serial = serial_int8_kernel()
            out["numba-int8-g64-serial"] = lambda xs: run(serial, self.q_group, xs)
            out["numba-int8-row-serial"] = lambda xs: run(serial, self.q_row, xs)
            x16 = int16_activation_kernel()
            out["numba-int8-x16"] = lambda xs: run(x16, self.q_group, xs)
            out["numba-bf16"] = lambda xs: run(
                kernels.bf16_matmul, [(b, None) for b in self.bf16], xs, with_scale=False
            )
            out["numba-fp32"] = lambda xs: run(
                kernels.f32_matmul, [(w, None) for w in self.fp32], xs, with_scale=False
            )
        out.update(self._ort_passes(threads))
        return out

    def _ort_passes(self, threads: int) -> dict[str, Callable[[dict], list[np.ndarray]]]:
        try:
            import onnxruntime as ort
            from onnx import TensorProto, helper
        except ImportError as exc:
            print(f"  (ONNX Runtime candidates skipped: {exc})")
            return {}
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1

        def session(node, inputs, initializers):
            graph = helper.make_graph(
                [node],
                "linear",
                inputs,
                [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
                initializer=initializers,
            )
            model = helper.make_model(
                graph,
                opset_imports=[
                    helper.make_opsetid("", 17),
                    helper.make_opsetid("com.microsoft", 1),
                ],
            )
            return ort.InferenceSession(
                model.SerializeToString(), options, providers=["CPUExecutionProvider"]
            )

        def nbits(w: np.ndarray, level: int):
            m, k = w.shape
            q, s = quantize(w, GROUP)
            packed = (q.astype(np.int16) + 128).astype(np.uint8).reshape(m, k // GROUP, GROUP)
            node = helper.make_node(
                "MatMulNBits",
                ["X", "B", "S"],
                ["Y"],
                domain="com.microsoft",
                K=k,
                N=m,
                bits=8,
                block_size=GROUP,
                accuracy_level=level,
            )
            inits = [
                helper.make_tensor(
                    "B", TensorProto.UINT8, packed.shape, packed.tobytes(), raw=True
                ),
                helper.make_tensor("S", TensorProto.FLOAT, [s.size], s.reshape(-1).tolist()),
            ]
            x_info = helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, k])
            return session(node, [x_info], inits)

        def dynq(w: np.ndarray):
            m, k = w.shape
            q, s = quantize(w, None)  # per output row = per column of Wᵀ
            qt = np.ascontiguousarray(q.T)
            node = helper.make_node(
                "DynamicQuantizeMatMul", ["X", "B", "S", "Z"], ["Y"], domain="com.microsoft"
            )
            inits = [
                helper.make_tensor("B", TensorProto.INT8, qt.shape, qt.tobytes(), raw=True),
                helper.make_tensor("S", TensorProto.FLOAT, [m], s[:, 0].tolist()),
                helper.make_tensor("Z", TensorProto.INT8, [m], bytes(m), raw=True),
            ]
            x_info = helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, k])
            return session(node, [x_info], inits)

        out = {}
        for name, make in (
            ("ort-nbits8", lambda w: nbits(w, 0)),
            ("ort-nbits8-acc4", lambda w: nbits(w, 4)),
            ("ort-dynq", dynq),
        ):
            start = time.perf_counter()
            try:
                sessions = [make(w) for w in self.fp32]
            except Exception as exc:  # an op this ORT build lacks
                print(f"  ({name} skipped: {type(exc).__name__}: {str(exc)[:120]})")
                continue
            self.ort[name] = [time.perf_counter() - start]
            out[name] = lambda xs, sessions=sessions: [
                sess.run(None, {"X": xs[sess.get_inputs()[0].shape[1]]})[0] for sess in sessions
            ]
        return out


def load_kernels(name: str = "kernels.catalog"):
    """A module of the package's numba kernels (``kernels.catalog``, or one of its parts),
    imported from its folder as the package ``narrow_kernels`` (the engine's other deps are not
    needed); numba's cache finds it again by that name."""
    if "narrow_kernels" not in sys.modules:
        package = types.ModuleType("narrow_kernels")
        package.__path__ = [str(REPO / "pipecat_pocket_tts/engine/backends/numpy")]
        sys.modules["narrow_kernels"] = package
    return importlib.import_module(f"narrow_kernels.{name}")


def serial_int8_kernel():
    """A candidate kept out of the package (its kernel before): one output row after another,
    a float32 scale per group of inputs (scale [m, groups]; one group is a scale per row)."""
    import numba

    @numba.njit(fastmath=True, nogil=True, boundscheck=False)
    def kernel(x, weight, scale, out):  # pragma: no cover - compiled
        n, k = x.shape
        m, groups = scale.shape
        size = k // groups
        for o in range(m):
            for b in range(n):
                total = np.float32(0.0)
                for g in range(groups):
                    base = g * size
                    acc = np.float32(0.0)
                    for i in range(size):
                        acc += np.float32(weight[o, base + i]) * x[b, base + i]
                    total += acc * scale[o, g]
                out[b, o] = total

    return kernel


def four_row_int8_kernel():
    """A candidate kept out of the package (the kernel before it widened batched rows): four
    distant int8 rows at once for every n, each row of x against the int8 rows directly."""
    import numba

    four_rows = load_kernels("kernels.matmul")._four_int8_rows

    @numba.njit(fastmath=True, nogil=True, boundscheck=False)
    def kernel(x, weight, scale, out):  # pragma: no cover - compiled
        quarter = weight.shape[0] // 4  # the benchmark's shapes are multiples of four
        for o in range(quarter):
            four_rows(x, weight, scale, (o, o + quarter, o + 2 * quarter, o + 3 * quarter), out)

    return kernel


def int16_activation_kernel():
    """A candidate kept out of the package: activations quantized to int16 per group of 64,
    integer multiply-adds as a numba loop, one weight row after another, a float scale product
    per group: slower than the float kernel. The package's int16 kernel
    (``matmul_kernels.int8_matmul_int16``) reads four distant rows, two rows of x per weight load, a
    scale per row, with its multiply-adds written in LLVM IR (``matmul_kernels._madd_rows``)."""
    import numba

    @numba.njit(fastmath=True, nogil=True, boundscheck=False, error_model="numpy")
    def kernel(x, weight, scale, out):  # pragma: no cover - compiled
        n, k = x.shape
        m, groups = scale.shape
        size = k // groups
        xq = np.empty(k, np.int16)
        xs = np.empty(groups, np.float32)
        for b in range(n):
            for g in range(groups):
                base = g * size
                top = np.float32(0.0)
                for i in range(size):
                    top = max(top, abs(x[b, base + i]))
                xs[g] = top / np.float32(32767.0) if top > 0 else np.float32(1.0)
                inverse = np.float32(1.0) / xs[g]
                for i in range(size):
                    xq[base + i] = np.int16(np.rint(x[b, base + i] * inverse))
            for o in range(m):
                total = np.float32(0.0)
                for g in range(groups):
                    base = g * size
                    acc = np.int32(0)
                    for i in range(size):  # kept int32 (numba would widen to int64)
                        acc = np.int32(acc + np.int32(np.int16(weight[o, base + i]) * xq[base + i]))
                    total += np.float32(acc) * (scale[o, g] * xs[g])
                out[b, o] = total

    return kernel


def compute_rates(kernels, repeats: int) -> None:
    """Weights per second of one step row (n = 1) when the weight sits in L2 (no memory
    traffic) and when it streams from DRAM: equal rates mean the kernel is bound by its
    instructions, not by memory bandwidth."""
    rng = np.random.default_rng(2)
    for label, (m, k), count in (("L2-resident", (512, 512), 600), ("DRAM", (4096, 4096), 4)):
        distinct = 1 if label == "L2-resident" else count  # DRAM: more than the L3 holds
        weights = [
            quantize(rng.standard_normal((m, k), dtype=np.float32), None) for _ in range(distinct)
        ] * (count // distinct)
        weights = [(q, sc[:, 0].copy()) for q, sc in weights]
        fp32 = rng.standard_normal((m, k), dtype=np.float32)
        x = rng.standard_normal((1, k), dtype=np.float32)
        out = np.empty((1, m), np.float32)

        def int8_pass(weights=weights, x=x, out=out):
            for q, sc in weights:
                kernels.int8_matmul(x, q, sc, out)

        ms = timed(int8_pass, repeats)
        rate = len(weights) * m * k / ms / 1e6
        fp32_ms = timed(lambda fp32=fp32, x=x: fp32 @ x[0], repeats)
        fp32_rate = m * k / fp32_ms / 1e6
        print(
            f"  {label} {m}×{k}: numba-int8 {rate:.1f} G weights/s; "
            f"numpy-fp32 matrix-vector {fp32_rate:.1f} G weights/s"
        )


def numba_compile_child() -> None:
    start = time.perf_counter()
    load_kernels().warm_up()
    print(f"{time.perf_counter() - start:.3f}")


def cold_start() -> None:
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        cmd = module_command(__spec__.name, "--child", "numba-compile")
        figures = [subprocess.run(cmd, env=env, capture_output=True, text=True) for _ in range(2)]
        if any(f.returncode for f in figures):
            print("numba cold start: failed:", figures[0].stderr[-300:])
            return
        first, cached = (float(f.stdout.split()[-1]) for f in figures)
        print(f"numba import + compile, empty cache: {first:.2f} s; from the cache: {cached:.2f} s")


def main() -> None:
    args = parse_args()
    if args.child == "numba-compile":
        numba_compile_child()
        return
    print(f"narrow kernels: layers {args.layers}, rows {args.rows}, threads {args.threads}")
    cold_start()
    try:
        print("compute rate at n = 1 (one weight, or a stream of one large weight):")
        compute_rates(load_kernels(), args.repeats)
    except ImportError as exc:
        print(f"  (skipped: {exc})")
    for layers in args.layers:
        cands = Candidates(layers)
        weight_mb = sum(w.nbytes for w in cands.fp32) / 1e6
        print(f"\n== {layers} layers ({weight_mb:.0f} MB fp32 of linears) ==")
        for threads in [args.threads]:
            passes = cands.passes(threads)
            for name, seconds in cands.ort.items():
                print(
                    f"  {name}: sessions for {len(cands.fp32)} linears built in {seconds[0]:.2f} s"
                )
            print(f"  -- threads {threads} (ms per pass; ratio to numpy-fp32; SNR dB) --")
            rng = np.random.default_rng(1)
            for n in args.rows:
                xs = {k: rng.standard_normal((n, k), dtype=np.float32) for k in (1024, 4096)}
                reference = passes["numpy-fp32"](xs)
                base = timed(lambda xs=xs, passes=passes: passes["numpy-fp32"](xs), args.repeats)
                cells = [f"numpy-fp32 {base:.1f}"]
                for name, fn in passes.items():
                    if name == "numpy-fp32":
                        continue
                    ms = timed(lambda fn=fn, xs=xs: fn(xs), args.repeats)
                    snr = min(snr_db(r, g) for r, g in zip(reference, fn(xs), strict=True))
                    cells.append(f"{name} {ms:.1f} ({ms / base:.2f}×, {snr:.0f} dB)")
                print(f"  n={n}: " + "; ".join(cells), flush=True)


if __name__ == "__main__":
    main()
