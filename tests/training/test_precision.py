"""``precision: fp32 | bf16 | auto``: one config key, resolved per device, used by the trainer."""
import json
import os

import pytest
import torch
from synthetic import synthetic_protocol

from agnostophobia.errors import ConfigError
from agnostophobia.training import precision as precision_module
from agnostophobia.training.config import TrainConfig, parse_experiment
from agnostophobia.training.precision import resolve_precision
from agnostophobia.training.trainer import Training


@pytest.mark.parametrize("native, faster, expected", [(True, True, "bf16"), (True, False, "fp32"),
                                                     (False, True, "fp32")])
def test_auto_is_bf16_exactly_where_the_cpu_computes_it_natively_and_faster(monkeypatch, native, faster, expected):
    monkeypatch.setattr(precision_module, "_cpu_has_native_bf16", lambda: native)
    monkeypatch.setattr(precision_module, "probe_cpu_bf16", lambda: (faster, 1.9 if faster else 1.05))
    assert resolve_precision("auto", "cpu") == expected
    assert resolve_precision("fp32", "cpu") == "fp32" and resolve_precision("bf16", "cpu") == "bf16"


@pytest.mark.parametrize("native, line", [(True, "precision: bf16 (auto: bf16 measured 1.90x as fast as fp32 on this CPU)"),
                                          (False, "precision: fp32 (auto: this CPU has no native bf16)")])
def test_train_and_reproduce_say_which_precision_auto_chose_and_why(monkeypatch, native, line):
    """configure (train, reproduce, tune) prints one line, keeps it for run_meta.json and the
    report's Setup, and resolves the config's auto; a precision the config sets says so."""
    from agnostophobia.experiments.reproduce import configure

    monkeypatch.setattr(precision_module, "_cpu_has_native_bf16", lambda: native)
    monkeypatch.setattr(precision_module, "probe_cpu_bf16", lambda: (True, 1.9))
    printed = []
    experiment, _ = configure(parse_experiment({"tensorboard": False}), device="cpu", log=printed.append)
    assert printed == [line] and experiment.train.precision == line.split()[1]
    assert f"precision: {experiment.precision_chosen}" == line
    printed.clear()
    configure(parse_experiment({"precision": "fp32", "tensorboard": False}), device="cpu", log=printed.append)
    assert printed == ["precision: fp32 (set in the config)"]


@pytest.mark.parametrize("recorded", ["bf16", "fp32"])
def test_a_continued_run_keeps_the_precision_auto_chose_when_it_started(monkeypatch, tmp_path, recorded):
    """A run resumed where ``auto`` would now decide otherwise (another machine, another thread
    count, a probe near its threshold) keeps the precision its config.yaml records, so its own
    checkpoints do not refuse it; a new run decides anew, and a precision the config sets wins."""
    from agnostophobia.experiments.reproduce import configure
    from agnostophobia.experiments.request import RunRequest

    other = "fp32" if recorded == "bf16" else "bf16"
    monkeypatch.setattr(precision_module, "_cpu_has_native_bf16", lambda: True)
    monkeypatch.setattr(precision_module, "probe_cpu_bf16", lambda: (other == "bf16", 1.9 if other == "bf16" else 1.05))
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(f"precision: {recorded}\n")
    printed = []
    experiment, _ = configure(parse_experiment({"tensorboard": False}), RunRequest(None, out=run), device="cpu",
                              log=printed.append)
    assert experiment.train.precision == recorded
    assert printed == [f"precision: {recorded} (auto: as the run in {run} being continued was trained; "
                       f"here auto chooses {other})"]
    fresh, _ = configure(parse_experiment({"tensorboard": False}), RunRequest(None, out=tmp_path / "new"),
                         device="cpu", log=printed.append)
    assert fresh.train.precision == other
    chosen, _ = configure(parse_experiment({"precision": other, "tensorboard": False}), RunRequest(None, out=run),
                          device="cpu", log=printed.append)
    assert chosen.train.precision == other
    # where auto still chooses what the run was trained with, the words are the first invocation's
    (run / "config.yaml").write_text(f"precision: {other}\n")
    printed.clear()
    same, _ = configure(parse_experiment({"tensorboard": False}), RunRequest(None, out=run), device="cpu",
                        log=printed.append)
    assert same.train.precision == other and same.precision_chosen == fresh.precision_chosen
    assert "being continued" not in printed[0]


def test_the_report_keeps_the_precision_line(tmp_path):
    from agnostophobia.experiments.report import write_report

    metrics = {"experiment": "x", "budget": None, "precision": "fp32 (auto: this CPU has no native bf16)",
               "fpr_readout": "r", "results": [], "table1": [], "per_seed": []}
    text = write_report(tmp_path, metrics).read_text()
    assert "- **precision**: fp32 (auto: this CPU has no native bf16)" in text.splitlines()


def test_precision_is_one_checked_key_and_amp_is_gone():
    with pytest.raises(ConfigError, match="'precision'"):
        parse_experiment({"precision": "fp16"})
    with pytest.raises(ConfigError, match="'amp'"):
        parse_experiment({"amp": True})


@pytest.mark.parametrize("precision, dtype", [("bf16", torch.bfloat16), ("fp32", torch.float32)])
def test_the_trainer_computes_convolutions_in_the_chosen_precision(precision, dtype):
    cfg = TrainConfig(approach="objectosphere", epochs=1, batch_size=8, precision=precision, device="cpu",
                      model_kwargs={"activation": "prelu"}, tensorboard=False, progress=False)
    run = Training(cfg, synthetic_protocol())
    seen = []
    conv = next(m for m in run.model.modules() if isinstance(m, torch.nn.Conv2d))
    conv.register_forward_hook(lambda module, inputs, output: seen.append(output.dtype))
    x = torch.rand(4, 1, 28, 28)
    loss, logits = run.batch_loss(x, torch.tensor([0, 1, -1, 2]))
    assert seen == [dtype]
    assert loss.dtype == torch.float32 and torch.isfinite(loss)  # the loss itself stays in fp32
    assert next(run.model.parameters()).dtype == torch.float32   # and so do the weights


@pytest.mark.parametrize("model_name", ["lenet++", "resnet18"])
def test_the_open_set_head_stays_fp32_under_bf16_autocast(model_name):
    from agnostophobia.models import build_model

    torch.manual_seed(0)
    model = build_model(model_name, num_outputs=5, **({"width": 4} if model_name == "resnet18" else {})).eval()
    x = torch.rand(3, 1 if model_name == "lenet++" else 3, 28 if model_name == "lenet++" else 32,
                   28 if model_name == "lenet++" else 32)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        logits, features = model(x)
        hidden = model.backbone(x)
    assert hidden.dtype == torch.bfloat16  # the convolutions do run in bf16
    assert logits.dtype == features.dtype == torch.float32
    with torch.no_grad():
        expected = model.features(hidden.float())
    torch.testing.assert_close(features, expected, rtol=0, atol=0)
    torch.testing.assert_close(logits, model.logits(expected), rtol=0, atol=0)


def test_the_bf16_probe_measures_once_per_machine_and_keeps_the_result(monkeypatch, tmp_path):
    """probe_cpu_bf16 times fp32 and bf16 once, keys the speed-up by the machine, and reads it back;
    a cache that is not JSON (or not a regular file) is measured anew, never trusted or fatal."""
    timings = {torch.float32: 2.0, torch.bfloat16: 1.0}
    calls = []
    monkeypatch.setattr(precision_module, "_time_step", lambda dtype: calls.append(dtype) or timings[dtype])
    cache = tmp_path / "probe.json"
    assert precision_module.probe_cpu_bf16(cache) == (True, 2.0) and len(calls) == 2
    assert precision_module.probe_cpu_bf16(cache) == (True, 2.0) and len(calls) == 2  # cached
    assert list(json.loads(cache.read_text())) == [precision_module._cpu_identity()]
    cache.write_text("{not json")
    timings[torch.bfloat16] = 1.9  # only 1.05x: fp32 stays
    assert precision_module.probe_cpu_bf16(cache) == (False, pytest.approx(2.0 / 1.9)) and len(calls) == 4
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    assert precision_module._read_probe_cache(fifo) == {}  # never opened: a FIFO would block


def test_the_probe_times_a_real_step_in_milliseconds():
    seconds = precision_module._time_step(torch.float32)
    assert 0 < seconds < 0.5
