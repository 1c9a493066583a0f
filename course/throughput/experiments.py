"""Lesson 03's experiments: latency, throughput sweeps and crossover, the asynchronous queue,
batching, fusion, host↔device transfers, reduced precision and the roofline.

On a GPU machine ``python -m course report --record-reference`` records all of them as
reference results (launch overhead, crossover sizes, roofline peaks).
"""

from __future__ import annotations

from .. import throughput as T
from ..report import by_size, experiment
from ..results import ResultSet
from . import plots as P


def _merge(name: str, sets: list[ResultSet], params: dict) -> ResultSet:
    out = ResultSet(name, params=params)
    for s in sets:
        out.extend(s)
    return out


@experiment("launch_latency", title="Latency of the smallest operation: call overhead, kernel launch, "
            "synchronize, tiny copies", lesson="03")
def launch_latency(devices, quick, progress):
    """Each smallest operation timed hundreds of times; the plot shows every call, not just a median."""
    sets = [T.smallest_op_latency(d, repeat=by_size(quick, 2000, 200, 20), budget_s=0.5 if quick else 5.0)
            for d in devices]
    return _merge("launch_latency", sets, {"devices": list(devices), "quick": quick})


@launch_latency.plot
def _(rs, references):
    return P.latency_figure(rs, [T.latency.relabel_latency(r) for r in references])


def _sweep_experiment(op: str, y: str):
    name = f"throughput_{op}"

    @experiment(name, title=f"Throughput against size: {T.get_op(op).description}, and the crossover",
                lesson="03")
    def run(devices, quick, progress):
        """Time per call against size on each device; the crossover is where the GPU starts to win."""
        rs = T.throughput_sweep(op, T.default_sizes(op, quick), devices=devices, repeat=5 if quick else 10,
                                budget_s=0.2 if quick else 1.0, total_budget_s=8.0 if quick else 300.0,
                                progress=progress)
        rs.experiment = name
        cx = T.find_crossover(rs, [], {"op": op})
        rs.params["crossover_n"] = cx.n
        rs.notes.append(cx.message)
        return rs

    @run.plot
    def _(rs, references):
        return P.sweep_plot(rs, references, y=y, op=op)

    return run


for _op, _y in (("add", "gb_per_s"), ("sum", "gb_per_s"), ("matmul", "gflops")):
    _sweep_experiment(_op, _y)


@experiment("memory_latency", title="Memory latency against working set (pointer chase), and Little's law "
            "for bytes in flight", lesson="03")
def memory_latency(devices, quick, progress):
    """One dependent load after another: caches, then main memory; bandwidth × latency = bytes in flight."""
    sizes = [2 ** k for k in range(12, 27 if quick else 31, 2)]
    rs = T.memory_latency_sweep(sizes, devices=devices, hops=2 ** 17 if quick else 2 ** 20, progress=progress)
    from ..hardware.machine import copy_bandwidth

    for d in devices:
        big = max(rs.select(device=d), key=lambda r: r["nbytes"])
        bw = copy_bandwidth(d, nbytes=2 ** 26 if d == "cpu" else 2 ** 28)["bytes_per_s"]
        fl = T.bytes_in_flight(bw, big["seconds_per_hop"], d)
        rs.add(device=d, kind="littles_law", bandwidth_bytes_per_s=bw, latency_s=big["seconds_per_hop"],
               bytes_in_flight=fl["bytes"], lines_in_flight=fl["lines"], line_bytes=fl["line_bytes"])
        rs.notes.append(f"{d.upper()}: {bw / 1e9:.1f} GB/s × {big['ns_per_hop']:.0f} ns = "
                        f"{T.in_flight_text(fl)} must be in flight to stream at full bandwidth.")
    return rs


@memory_latency.plot
def _(rs, references):
    return P.memory_latency_figure(rs, references)


@experiment("async_chain", title="Asynchronous launches: the queue you cannot see", lesson="03")
def async_chain(devices, quick, progress):
    """A chain of 20 elementwise ops: host time until the calls return, with one wait, with a wait each."""
    sets = [T.async_chain(d, n=by_size(quick, 2 ** 24, 2 ** 20, 2 ** 12), chain=20) for d in devices]
    return _merge("async_chain", sets, {"devices": list(devices), "chain": 20})


@async_chain.plot
def _(rs, references):
    return P.async_figure([rs, *references])


@experiment("batching", title="Batching: samples per second vs latency per batch, and Little's law",
            lesson="03")
def batching(devices, quick, progress):
    """An MLP training step (lesson 01) across batch sizes on each device."""
    bs = [1, 4, 16, 64, 256] if quick else [2 ** k for k in range(0, 14)]
    return T.batch_sweep(bs, devices=devices, repeat=5 if quick else 10, total_budget_s=10.0 if quick else 300.0,
                         progress=progress)


@batching.plot
def _(rs, references):
    return P.batch_figure(rs, references)


@experiment("fusion", title="Kernel fusion: a chain of elementwise steps, unfused vs fused", lesson="03")
def fusion(devices, quick, progress):
    """Four elementwise steps on 4M (quick) or 64M elements: kernels launched, bytes moved, time."""
    return T.fusion_compare(n=2 ** 22 if quick else 2 ** 26, steps=4, devices=devices)


@fusion.plot
def _(rs, references):
    return P.fusion_figure(rs, references)


@experiment("transfer_bandwidth", title="Host↔device copies: pageable vs pinned memory", lesson="03")
def transfer(devices, quick, progress):
    """Copy bandwidth between host and GPU against size; needs a GPU."""
    if "gpu" not in devices:
        rs = ResultSet("transfer_bandwidth", params={"devices": list(devices)})
        rs.notes.append("Not measured: host↔device copies need a GPU, and none was used in this run.")
        return rs
    sizes = [2 ** k for k in range(12, 27, 2)] if quick else [2 ** k for k in range(10, 31)]
    return T.transfer_bandwidth(sizes, progress=progress)


@transfer.plot
def _(rs, references):
    return P.transfer_figure(rs, references)


@experiment("mixed_precision", title="Reduced precision: matrix products in float32, TF32, float16, bfloat16",
            lesson="03")
def mixed_precision(devices, quick, progress):
    """Matrix-product GFLOP/s and memory per dtype; tensor cores on the GPU (float16, bfloat16, and float32 data
    in TF32 through PyTorch), emulated float16 on the CPU."""
    return T.precision_sweep([64, 128, 256] if quick else [256, 1024, 4096], devices=devices,
                             dtypes=("float32", "tf32", "float16", "bfloat16"),
                             total_budget_s=10.0 if quick else 300.0, progress=progress)


@mixed_precision.plot
def _(rs, references):
    return P.precision_figure(rs, references)


@experiment("roofline", title="The roofline of this machine, with the course's operations on it", lesson="03")
def roofline(devices, quick, progress):
    """Peak copy bandwidth and peak matrix-product FLOP/s measured per device and dtype (float32, float16,
    and bfloat16 through PyTorch when installed); elementwise
    ops, matrix products, the scan (lesson 04) and an MLP step (lesson 01) placed by intensity and rate."""
    dtypes = ["float32", "float16"] + (["bfloat16"] if T.torch_available() else [])
    return T.measure_roofline(devices, dtypes=dtypes, quick=quick, total_budget_s=15.0 if quick else 600.0,
                              progress=progress)


@roofline.plot
def _(rs, references):
    return P.roofline_figure(rs, references)
