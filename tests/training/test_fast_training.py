"""The CPU-speed paths of training: the airbench network and its data-dependent initialisation, the
per-step one-cycle schedule, ``compile`` (torch.compile with an eager fallback), and the ``converged``
CIFAR budget at a smoke size."""
import math
import warnings

import numpy as np
import pytest
import torch
from types import SimpleNamespace

from agnostophobia.errors import AgnostophobiaWarning, ConfigError
from agnostophobia.models import AirbenchNet, build_model
from agnostophobia.models.airbench import WHITENING_EPS
from agnostophobia.training import compiled as compiled_module
from agnostophobia.training.compiled import CompiledOrEager, resolve_compile
from agnostophobia.training.config import TrainConfig, load_experiment
from agnostophobia.training.schedules import one_cycle
from agnostophobia.training.trainer import Training, train_one_epoch


def _protocol(n=96, classes=3, size=32, seed=0):
    rng = np.random.default_rng(seed)
    labels = np.where(np.arange(n) % 4 == 3, -1, np.arange(n) % classes).astype(np.int64)
    # class-dependent colour so that a few steps can learn something
    images = rng.integers(0, 128, (n, 3, size, size)).astype(np.uint8)
    images[labels >= 0, np.maximum(labels[labels >= 0], 0) % 3] += 100
    split = SimpleNamespace(images=images, labels=labels)
    return SimpleNamespace(name="synthetic", num_classes=classes, train=split, val=split)


# -- the network -----------------------------------------------------------------------------
def test_airbench_returns_logits_and_features_and_freezes_what_airbench_freezes():
    model = AirbenchNet(num_outputs=5, feature_dim=16, widths=(8, 16, 16))
    logits, features = model(torch.rand(4, 3, 32, 32))
    assert logits.shape == (4, 5) and features.shape == (4, 16)
    assert model.logits.bias is None  # Theorem 1: F = 0 gives equal logits
    frozen = {name for name, p in model.named_parameters() if not p.requires_grad}
    assert "whiten.weight" in frozen and all(name.endswith("norm1.weight") or name.endswith("norm2.weight")
                                             for name in frozen - {"whiten.weight"})
    assert "whiten.bias" not in frozen


def _plain_features(model, images):
    """F of the network without test-time augmentation, one view per row of ``images``."""
    model.tta = "none"
    return model(images)[1]


def test_flip_tta_network_is_mirror_symmetric_and_averages_the_two_views():
    torch.manual_seed(0)
    model = AirbenchNet(num_outputs=4, feature_dim=6, widths=(8, 16, 16), tta="flip").eval()
    x = torch.rand(3, 3, 32, 32)
    logits, features = model(x)
    mirrored_logits, mirrored_features = model(x.flip(-1))
    assert torch.allclose(features, mirrored_features, atol=1e-6) and torch.allclose(logits, mirrored_logits, atol=1e-6)
    plain = _plain_features(model, torch.cat([x, x.flip(-1)]))
    assert torch.allclose(features, (plain[:3] + plain[3:]) / 2, atol=1e-5)
    assert (features - plain[:3]).abs().max() > 1e-4  # the average differs from one view
    assert torch.allclose(logits, features @ model.logits.weight.T, atol=1e-5)  # logits from the averaged F


def test_flip_translate_tta_weights_airbench_s_six_views():
    """The views built independently (numpy's reflect padding): the unshifted pair weighs 1/2, each
    one-pixel-shifted pair (up-left, down-right) 1/4."""
    torch.manual_seed(1)
    model = AirbenchNet(num_outputs=4, feature_dim=6, widths=(8, 16, 16), tta="flip-translate").eval()
    x = torch.rand(2, 3, 32, 32)
    _, features = model(x)
    padded = torch.from_numpy(np.pad(x.numpy(), ((0, 0), (0, 0), (1, 1), (1, 1)), mode="reflect"))
    up_left, down_right = padded[..., :32, :32], padded[..., 2:, 2:]
    views = [x, x.flip(-1), up_left, up_left.flip(-1), down_right, down_right.flip(-1)]
    plain = _plain_features(model, torch.cat(views)).reshape(6, 2, -1)
    weights = torch.tensor([1 / 4, 1 / 4, 1 / 8, 1 / 8, 1 / 8, 1 / 8])
    assert torch.allclose(features, (weights[:, None, None] * plain).sum(0), atol=1e-5)


@pytest.mark.slow
def test_tta_network_exports_to_onnx_with_its_views(tmp_path):
    """The exported model (torch.onnx, dynamo; run in onnxruntime) is the symmetric network: the
    views' padding, mirroring and averaging are in the graph, for any batch size."""
    ort = pytest.importorskip("onnxruntime")
    torch.manual_seed(4)
    model = AirbenchNet(num_outputs=4, feature_dim=6, widths=(8, 16, 16), tta="flip-translate").eval()
    x = torch.rand(3, 3, 32, 32)
    program = torch.onnx.export(model, (x,), dynamo=True, dynamic_shapes=({0: torch.export.Dim("batch")},),
                                input_names=["images"])
    program.save(str(tmp_path / "airbench.onnx"))
    session = ort.InferenceSession(str(tmp_path / "airbench.onnx"))
    for batch in (x, torch.rand(5, 3, 32, 32)):
        logits, features = session.run(None, {"images": batch.numpy()})
        expected_logits, expected_features = model(batch)
        assert np.allclose(logits, expected_logits.detach().numpy(), atol=1e-5)
        assert np.allclose(features, expected_features.detach().numpy(), atol=1e-5)


def test_tta_leaves_training_alone_and_refuses_an_unknown_mode():
    torch.manual_seed(2)
    model = AirbenchNet(num_outputs=4, feature_dim=6, widths=(8, 16, 16), tta="flip-translate").train()
    x = torch.rand(4, 3, 32, 32)
    torch.manual_seed(3)
    with_tta = model(x)[1]
    torch.manual_seed(3)
    assert torch.equal(with_tta, _plain_features(model, x))  # train mode: one view, as without tta
    with pytest.raises(ValueError, match="tta must be one of none, flip, flip-translate, got 'mirror'"):
        AirbenchNet(tta="mirror")


def test_identity_initialisation_passes_its_input_through():
    group = AirbenchNet(widths=(32, 16, 16)).backbone[1]  # 24 whitened channels in, 32 out
    x = torch.randn(2, group.conv1.in_channels, 6, 6)
    assert torch.allclose(group.conv1(x)[:, :x.shape[1]], x, atol=1e-6)
    assert not torch.allclose(group.conv1(x)[:, x.shape[1]:], torch.zeros(()))  # the rest: random


def test_patch_whitening_makes_the_patches_white():
    """After initialise_from_data the 12 positive whitening filters map the training images' 2x2
    patches to (nearly) uncorrelated unit-variance channels."""
    rng = np.random.default_rng(0)
    base = rng.random((64, 1, 32, 32))
    images = np.clip(np.concatenate([base, 0.6 * base + 0.4 * rng.random((64, 1, 32, 32)),
                                     rng.random((64, 1, 32, 32))], axis=1), 0, 1)
    images = torch.from_numpy((images * 255).astype(np.uint8))
    model = AirbenchNet(widths=(8, 16, 16))
    before = model.whiten.weight.clone()
    model.initialise_from_data(images)
    assert not torch.equal(before, model.whiten.weight)
    x = images.float() / 255 - model.mean
    out = torch.nn.functional.conv2d(x, model.whiten.weight[:12]).permute(0, 2, 3, 1).reshape(-1, 12).double()
    covariance = out.T @ out / len(out)
    # unit variance up to the eigenvalue regulariser: lambda / (lambda + eps) for each direction
    patches = x.unfold(2, 2, 1).unfold(3, 2, 1).permute(0, 2, 3, 1, 4, 5).reshape(-1, 12).double()
    eigenvalues = torch.linalg.eigvalsh(patches.T @ patches / len(patches))
    expected = eigenvalues / (eigenvalues + WHITENING_EPS)
    assert torch.allclose(covariance.diagonal().sort().values, expected.sort().values, atol=1e-3)
    off = covariance - torch.diag(covariance.diagonal())
    assert off.abs().max() < 1e-4


def test_trainer_initialises_a_model_from_its_training_images():
    cfg = TrainConfig(approach="softmax", model="airbench", model_kwargs={"widths": [8, 8, 8], "feature_dim": 8},
                      epochs=1, batch_size=32, device="cpu", precision="fp32", tensorboard=False, progress=False)
    protocol = _protocol()
    run = Training(cfg, protocol)
    expected = torch.from_numpy(protocol.train.images).float().div(255).mean(dim=(0, 2, 3))
    assert torch.allclose(run.model.mean.flatten(), expected, atol=1e-5)


# -- the schedule ----------------------------------------------------------------------------
def test_one_cycle_warms_up_linearly_then_decays_to_zero():
    total, warmup = 100, 0.2
    factors = [one_cycle(step, total, warmup) for step in range(total + 1)]
    assert factors[0] == pytest.approx(0.2) and factors[20] == pytest.approx(1.0) and factors[100] == 0.0
    assert all(a < b for a, b in zip(factors[:20], factors[1:21]))
    assert all(a > b for a, b in zip(factors[20:100], factors[21:101]))
    assert factors[60] == pytest.approx(0.5)


def test_onecycle_moves_the_learning_rate_at_every_step_and_resumes_on_the_same_curve(tmp_path):
    cfg = TrainConfig(approach="softmax", model="airbench", model_kwargs={"widths": [8, 8, 8], "feature_dim": 8},
                      epochs=3, batch_size=32, lr=0.1, optimizer="sgd", scheduler="onecycle", warmup_fraction=0.25,
                      device="cpu", precision="fp32", tensorboard=False, progress=False)
    run = Training(cfg, _protocol())
    total = cfg.epochs * run.steps_per_epoch
    seen = []
    run.optimizer.register_step_pre_hook(lambda optimizer, args, kwargs: seen.append(optimizer.param_groups[0]["lr"]))
    train_one_epoch(run, 0)
    state = run.seed_state(0)
    assert seen == pytest.approx([0.1 * one_cycle(step, total, 0.25) for step in range(run.steps_per_epoch)])
    resumed = Training(cfg, _protocol())
    resumed.load_seed_states([state], ["last.pt"])
    assert resumed.optimizer.param_groups[0]["lr"] == pytest.approx(0.1 * one_cycle(run.steps_per_epoch, total, 0.25))


def test_onecycle_with_a_captured_step_is_refused():
    with pytest.raises(ConfigError, match="cuda_graph.*onecycle"):
        TrainConfig(scheduler="onecycle", cuda_graph=True).validate()


# -- compile ---------------------------------------------------------------------------------
def test_resolve_compile_decides_by_setting_device_and_compiler(monkeypatch):
    assert resolve_compile(False, "cpu")[0] is False
    assert resolve_compile(True, "cpu")[0] is True
    assert resolve_compile("auto", "cuda")[0] is False  # not measured on a GPU: off
    assert resolve_compile("auto", "cpu", stacked=True)[0] is False
    monkeypatch.setattr(compiled_module, "cpp_compiler", lambda: "")
    on, why = resolve_compile("auto", "cpu")
    assert not on and "no C++ compiler" in why
    monkeypatch.setattr(compiled_module, "cpp_compiler", lambda: "/usr/bin/g++")
    assert resolve_compile("auto", "cpu")[0] is True


def test_a_failed_compile_trains_eagerly_and_says_so_once(monkeypatch):
    compiled_calls = []

    def broken_compile(module, **kwargs):
        def call(*args, **kw):
            compiled_calls.append(args)
            raise RuntimeError("InvalidCxxCompiler: No working C++ compiler found\nmore detail")
        return call

    monkeypatch.setattr(torch, "compile", broken_compile)
    model = build_model("lenet++", num_outputs=3)
    wrapped = CompiledOrEager(model)
    x = torch.rand(2, 1, 28, 28)
    with pytest.warns(AgnostophobiaWarning, match=r"torch.compile failed .*No working C\+\+ compiler found\); "
                                                  r"training eagerly"):
        logits, _ = wrapped(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once
        again, _ = wrapped(x)
    assert len(compiled_calls) == 1  # the compiled module is never called again
    assert torch.equal(logits, again) and torch.equal(logits, model(x)[0])
    assert wrapped.state_dict().keys() == {f"module.{k}" for k in model.state_dict()}


def test_compile_setting_is_checked_and_free_on_resume():
    assert TrainConfig(compile="auto").validate().compile == "auto"
    with pytest.raises(ConfigError, match="'compile'"):
        TrainConfig(compile="sometimes").validate()
    from agnostophobia.training.records import RESUME_FREE_KEYS
    assert "compile" in RESUME_FREE_KEYS and "scheduler" not in RESUME_FREE_KEYS


# -- the converged CIFAR recipe ---------------------------------------------------------------
def test_converged_budget_is_the_airbench_recipe_within_70_tflop():
    """The budget's training compute (torch.utils.flop_counter, forward and backward, times the
    images softmax trains on) is at most 70 TFLOP, about two thirds of the cpu budget's: the trial
    chosen on validation (16 epochs; docs/guide/scaling.md)."""
    from torch.utils.flop_counter import FlopCounterMode

    experiment = load_experiment("cifar")

    def training_flops(budget):
        cfg = experiment.for_budget(budget).train
        model = build_model(cfg.model, num_outputs=6, **cfg.model_kwargs)
        with FlopCounterMode(display=False) as counter:
            logits, _ = model(torch.rand(8, 3, 32, 32))
            logits.sum().backward()
        knowns = cfg.protocol_limits["max_known_train"]  # softmax trains on the knowns
        return counter.get_total_flops() / 8 * knowns * cfg.epochs, cfg

    converged, cfg = training_flops("converged")
    cpu, _ = training_flops("cpu")
    assert cfg.model == "airbench" and cfg.scheduler == "onecycle" and cfg.augment == "crop-flip"
    # the budget as chosen: at most 70 TFLOP, about two thirds of the cpu budget's 101 TFLOP
    assert converged <= 70e12 and converged < 0.7 * cpu


def test_converged_recipe_trains_at_a_smoke_size():
    """The budget's settings (network, schedule, compile: auto) on a small synthetic protocol: a
    few steps lower the loss and learn the classes."""
    cfg = load_experiment("cifar").for_budget("converged").for_approach("softmax", 0)
    cfg.epochs, cfg.batch_size, cfg.device, cfg.progress = 6, 32, "cpu", False
    cfg.model_kwargs = {"widths": [8, 16, 16], "feature_dim": 8}
    cfg.compile = False  # compiling costs tens of seconds; the compiled path has its own tests
    run = Training(cfg.validate(), _protocol(n=192))
    rows = [train_one_epoch(run, epoch) for epoch in range(cfg.epochs)]
    assert rows[-1]["train_loss"] < rows[0]["train_loss"] and rows[-1]["train_acc"] > 0.6
    assert math.isclose(run.optimizer.param_groups[0]["lr"], 0.0, abs_tol=1e-12)


@pytest.mark.slow
def test_compiled_training_matches_eager_training():
    """A real torch.compile of LeNet++ (inductor, where a C++ compiler exists): one epoch's loss
    as the eager run's, within floating-point rounding."""
    if not compiled_module.cpp_compiler():
        pytest.skip("no C++ compiler for inductor")
    rows = {}
    for setting in (False, True):
        cfg = TrainConfig(approach="entropic", model_kwargs={"activation": "prelu"}, epochs=1, batch_size=32,
                          device="cpu", precision="fp32", tensorboard=False, progress=False, compile=setting)
        protocol = _protocol(n=64, size=28)
        protocol.train.images = protocol.train.images[:, :1]
        run = Training(cfg, protocol)
        assert run.compiled is setting
        rows[setting] = train_one_epoch(run, 0)
    assert rows[True]["train_loss"] == pytest.approx(rows[False]["train_loss"], rel=1e-3)
