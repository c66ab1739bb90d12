"""Where the guards' share of a step goes on a GPU: the profiler over the same timed steps of
benchmarks/gpu_speed.py's variants (d: overt bf16 + compile with the default guards, f: the same
without guards, b: the tuned hand loop), one variant after the other in one process.

    python benchmarks/gpu_profile.py --variants d,f --steps 20 --warmup 8     # on the GPU machine
    python benchmarks/gpu_profile.py --tiny                                    # a CPU rehearsal

Per variant and timed step: host-side time (the profiler's wall time between the step marks),
device synchronisations (cudaStreamSynchronize / cudaDeviceSynchronize / cudaEventSynchronize /
device-to-host copies), kernel launches and device time, and the ten CPU ops whose self time grew
most from f to d.  Profiling slows every variant alike; the speed comparison is gpu_speed.py's.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_speed  # noqa: E402

SYNCS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")


def profile_variant(spec: gpu_speed.Spec, name: str) -> dict[str, Any]:
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if spec.device.type == "cuda" else [])
    prof = profile(activities=activities)
    original = gpu_speed._Clock.tick

    def tick(clock: Any, trainer: Any) -> None:
        original(clock, trainer)
        if clock.step == spec.warmup:
            prof.start()
        elif clock.step == spec.warmup + spec.steps:
            prof.stop()

    gpu_speed._Clock.tick = tick
    hand_marks: list[int] = []
    try:
        if name.startswith("b"):  # the hand loop has no clock: profile its whole run
            prof.start()
            gpu_speed.run_variant(spec, name)
            prof.stop()
            hand_marks.append(spec.warmup + spec.steps)
        else:
            gpu_speed.run_variant(spec, name)
    finally:
        gpu_speed._Clock.tick = original
    steps = hand_marks[0] if hand_marks else spec.steps
    ops: dict[str, dict[str, float]] = {}
    for e in prof.key_averages():
        ops[e.key] = {"count": e.count, "self_cpu_us": e.self_cpu_time_total,
                      "device_us": getattr(e, "self_device_time_total", getattr(e, "self_cuda_time_total", 0.0))}
    syncs = sum(ops.get(k, {}).get("count", 0) for k in SYNCS)
    d2h = sum(v["count"] for k, v in ops.items() if "Memcpy DtoH" in k or k == "aten::_local_scalar_dense")
    launch_names = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx")
    launches = sum(v["count"] for k, v in ops.items() if k in launch_names)
    device_us = sum(v["device_us"] for k, v in ops.items() if not k.startswith("cuda") and not k.startswith("aten::"))
    host_us = sum(v["self_cpu_us"] for v in ops.values())
    return {"steps": steps, "syncs_per_step": syncs / steps, "scalar_reads_per_step": d2h / steps,
            "launches_per_step": launches / steps, "host_self_us_per_step": host_us / steps,
            "device_kernel_us_per_step": device_us / steps, "ops": ops}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--variants", default="d,f")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--warmup", type=int, default=None)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    ns = argparse.Namespace(tiny=args.tiny, batch_size=0, device=None, compile=None, text=None,
                            warmup=args.warmup or (2 if args.tiny else 8), steps=args.steps or (6 if args.tiny else 20))
    spec = gpu_speed.Spec(ns)
    wanted = [v for v in gpu_speed.VARIANTS if any(v.startswith(p.strip()) for p in args.variants.split(","))]
    out: dict[str, Any] = {}
    for name in wanted:
        gpu_speed.run_variant(spec, name)  # compiled and warm before the profiled run
        out[name] = profile_variant(spec, name)
        r = out[name]
        print(f"{name:32s} syncs/step {r['syncs_per_step']:.2f}  scalar reads/step {r['scalar_reads_per_step']:.2f}  "
              f"launches/step {r['launches_per_step']:.1f}  host self {r['host_self_us_per_step']:.0f} us/step  "
              f"device {r['device_kernel_us_per_step']:.0f} us/step", flush=True)
    names = list(out)
    if len(names) >= 2:
        a, b = out[names[0]]["ops"], out[names[1]]["ops"]
        grew = sorted(((a.get(k, {}).get("self_cpu_us", 0) / out[names[0]]["steps"]
                        - b.get(k, {}).get("self_cpu_us", 0) / out[names[1]]["steps"], k) for k in set(a) | set(b)),
                      reverse=True)[:12]
        print(f"self CPU time per step that grew from {names[1]} to {names[0]}:")
        for us, k in grew:
            print(f"  {us:+9.1f} us  {k}  (count/step {a.get(k, {}).get('count', 0) / out[names[0]]['steps']:.2f} vs "
                  f"{b.get(k, {}).get('count', 0) / out[names[1]]['steps']:.2f})")
    if args.json:
        brief = {k: {kk: vv for kk, vv in v.items() if kk != "ops"} for k, v in out.items()}
        Path(args.json).write_text(json.dumps(brief, indent=1) + "\n")
    return out


if __name__ == "__main__":
    main()
