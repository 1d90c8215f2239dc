"""Temporary: where the captured step's weights differ from the eager loop's (not committed)."""
import dataclasses, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, "tests")
import torch
from test_training import tiny_config
from synthetic import synthetic_protocol
from test_cuda_graph import CUDA_VARIANTS, BATCH
from agnostophobia.training.trainer import Training, fit
from agnostophobia.training import cuda_graph
from agnostophobia.training.checkpoint import load_checkpoint

def weights(d): return load_checkpoint(d / "last.pt")["model"]
def maxdiff(a, b): return max(float((a[k].float() - b[k].float()).abs().max()) for k in a if a[k].is_floating_point())
original = Training.capture_step
protocol = synthetic_protocol()
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
if DEVICE == "cpu":  # a dry run of this script's Python: the stand-in everywhere
    from agnostophobia.training import trainer
    trainer.check_cuda_graph = lambda enabled, device, distributed: enabled
    cuda_graph.cuda_capture = cuda_graph.eager_capture
    Training.__init__.__globals__["cuda_capture"] = cuda_graph.eager_capture
for param in CUDA_VARIANTS:
    approach, options = param.values
    t = time.time()
    d = Path(tempfile.mkdtemp())
    cfg = tiny_config(approach=approach, batch_size=BATCH, device=DEVICE, precision="fp32", deterministic=True,
                      sample_weighting=True, **options)
    g = dataclasses.replace(cfg, cuda_graph=True)
    init = {k: v.detach().cpu().clone() for k, v in Training(cfg, protocol).model.state_dict().items()}
    fit(cfg, protocol, d / "eager"); fit(cfg, protocol, d / "eager2")
    Training.capture_step = lambda run, capture: original(run, cuda_graph.eager_capture)
    stand = fit(g, protocol, d / "stand")
    Training.capture_step = original
    graph = fit(g, protocol, d / "graph"); fit(g, protocol, d / "graph2")
    fit(g, protocol, d / "resumed", stop_after_epoch=1); res = fit(g, protocol, d / "resumed")
    w = {n: weights(d / n) for n in ("eager", "eager2", "stand", "graph", "graph2", "resumed")}
    print(f"{param.id}: epochs {cfg.epochs}, lr {cfg.lr}, trained distance {maxdiff(init, w['eager']):.3e}; captures "
          f"graph {graph.captured_step.captures} resumed {res.captured_step.captures}; max|diff|: eager-eager2 "
          f"{maxdiff(w['eager'], w['eager2']):.3e} eager-standin(capturable) {maxdiff(w['eager'], w['stand']):.3e} "
          f"standin-graph {maxdiff(w['stand'], w['graph']):.3e} graph-graph2 {maxdiff(w['graph'], w['graph2']):.3e} "
          f"graph-resumed {maxdiff(w['graph'], w['resumed']):.3e} eager-graph {maxdiff(w['eager'], w['graph']):.3e} "
          f"({time.time() - t:.1f}s)", flush=True)
