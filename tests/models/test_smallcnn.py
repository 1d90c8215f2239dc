"""``small-cnn``: the registered small CNN for one's own images (32-128-d features), started from a
local state dict (``model_kwargs: {weights: PATH}``) and frozen or fine-tuned (``freeze``)."""
from __future__ import annotations

import pytest
import torch

from agnostophobia.errors import ConfigError
from agnostophobia.models import MODELS, SmallCNN, build_model, loaded_weights

from runs import run_cli, write_config

TINY = {"in_channels": 1, "width": 4, "feature_dim": 32}


def test_it_is_registered_and_returns_logits_and_features_of_any_image_size():
    assert "small-cnn" in MODELS.names()
    model = build_model("small-cnn", 5, **TINY).eval()
    for size in (8, 28, 64):
        logits, features = model(torch.rand(3, 1, size, size))
        assert logits.shape == (3, 5) and features.shape == (3, 32)
    assert model.logits.bias is None  # F = 0 gives equal logits (Theorem 1)
    assert SmallCNN(num_outputs=3).features.out_features == 64 and SmallCNN(num_outputs=3).backbone[0][0].in_channels == 3


def test_weights_from_a_local_state_dict_start_the_trunk_never_the_logits(tmp_path):
    source = SmallCNN(num_outputs=7, **TINY)
    torch.save(source.state_dict(), tmp_path / "pretrained.pt")
    torch.save({"model": source.state_dict(), "epoch": 3}, tmp_path / "checkpoint.pt")  # a run's best.pt holds "model"
    for name in ("pretrained.pt", "checkpoint.pt"):
        model = build_model("small-cnn", 4, weights=str(tmp_path / name), **TINY)
        for key, value in source.state_dict().items():
            if key.startswith(("backbone.", "features.")):
                assert torch.equal(model.state_dict()[key], value), key
        assert model.logits.weight.shape == (4, 32)
        trunk = sum(k.startswith(("backbone.", "features.")) for k in source.state_dict())
        assert loaded_weights(model) == (f"weights {tmp_path / name}: {trunk} of {len(model.state_dict())} tensors "
                                         f"loaded (the trunk and the feature layer; the logit layer starts from "
                                         f"random weights)")
    fresh = build_model("small-cnn", 4, **TINY)
    assert not torch.equal(fresh.backbone[0][0].weight, source.backbone[0][0].weight)
    assert loaded_weights(fresh) is None


@pytest.mark.parametrize("content, message", [
    (None, "does not exist"), (b"not a torch file", "cannot be read"),
    ("other width", "does not fit this network")])
def test_a_bad_weights_file_is_one_line_naming_it(tmp_path, content, message):
    path = tmp_path / "weights.pt"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content == "other width":
        torch.save(SmallCNN(num_outputs=3, in_channels=1, width=8).state_dict(), path)
    with pytest.raises(ConfigError, match=f"small-cnn: weights file .*weights.pt {message}"):
        build_model("small-cnn", 3, weights=str(path), **TINY)


def test_freeze_backbone_trains_the_head_alone_and_keeps_the_trunk_in_eval_mode():
    model = build_model("small-cnn", 3, freeze="backbone", **TINY).train()
    assert not model.backbone.training and model.features.training
    trunk = {k: v.clone() for k, v in model.backbone.state_dict().items()}
    optimiser = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    logits, _ = model(torch.rand(8, 1, 16, 16))
    logits.sum().backward()
    optimiser.step()
    assert all(torch.equal(v, model.backbone.state_dict()[k]) for k, v in trunk.items())  # BatchNorm stats too
    assert all(not p.requires_grad for p in model.backbone.parameters())
    with pytest.raises(ConfigError, match="freeze must be one of none, backbone"):
        build_model("small-cnn", 3, freeze="all", **TINY)


@pytest.mark.slow
def test_a_pretrained_run_trains_resumes_evaluates_and_exports(tmp_path, real_data_dir):
    weights = tmp_path / "pretrained.pt"
    torch.save(SmallCNN(num_outputs=26, **TINY).state_dict(), weights)
    config = write_config(tmp_path / "small.yaml", model="small-cnn", approaches=["entropic"], epochs=2,
                          model_kwargs={**TINY, "weights": str(weights), "freeze": "backbone"})
    run = tmp_path / "run"
    common = ["--data-dir", real_data_dir, "--no-progress"]
    killed = run_cli(["train", config, "--out", run, *common], kill_at="epoch-end:1")  # killed after epoch 1
    assert killed.returncode != 0 and (run / "seed0" / "entropic" / "last.pt").exists()
    resumed = run_cli(["train", config, "--out", run, "--resume", *common])
    assert resumed.returncode == 0, resumed.stderr
    trunk = {k: v for k, v in torch.load(run / "seed0" / "entropic" / "best.pt", weights_only=True)["model"].items()
             if k.startswith("backbone.") and "num_batches" not in k}
    pretrained = torch.load(weights, weights_only=True)
    assert all(torch.equal(v, pretrained[k]) for k, v in trunk.items())  # frozen through training and resume
    assert run_cli(["evaluate", run, *common]).returncode == 0
    assert run_cli(["calibrate", run, "--fpr", "0.5", "--data-dir", real_data_dir]).returncode == 0
    exported = run_cli(["export", run, "--out", tmp_path / "model.pt2", "--data-dir", real_data_dir])
    assert exported.returncode == 0, exported.stderr
    assert (tmp_path / "model.pt2").stat().st_size > 0


def test_a_run_says_which_weights_it_started_from_and_a_resumed_run_does_not(tmp_path, caplog):
    """Issue 57: nothing confirmed that ``weights: PATH`` was loaded; the trainer now says it
    once, when a run starts, with the model's count of tensors loaded."""
    from agnostophobia.training.config import TrainConfig
    from agnostophobia.training.fitting import fit
    from synthetic import synthetic_protocol

    torch.save(SmallCNN(num_outputs=7, **TINY).state_dict(), tmp_path / "pretrained.pt")
    cfg = TrainConfig(model="small-cnn", model_kwargs={"weights": str(tmp_path / "pretrained.pt"), **TINY},
                      approach="entropic", epochs=1, batch_size=24, tensorboard=False, progress=False,
                      cpu_threads=1).validate()
    with caplog.at_level("INFO", logger="agnostophobia"):
        fit(cfg, synthetic_protocol(), tmp_path / "run")
    said = [r.getMessage() for r in caplog.records if "tensors loaded" in r.getMessage()]
    assert said == [f"entropic: weights {tmp_path / 'pretrained.pt'}: "
                    f"{loaded_weights(build_model('small-cnn', 3, **cfg.model_kwargs)).split(': ', 1)[1]}"]
    caplog.clear()
    with caplog.at_level("INFO", logger="agnostophobia"):
        fit(cfg, synthetic_protocol(), tmp_path / "run")  # finished: reloaded, its weights are the run's
    assert not [r for r in caplog.records if "tensors loaded" in r.getMessage()]
