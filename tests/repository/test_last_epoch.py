"""The last-epoch copy of a run (benchmarks/last_epoch.py): the copy's models of the named approaches
hold their last epoch as their result, their outputs are computed again from it by the same command,
and the run itself is left as it was."""
import importlib.util
import shutil

import numpy as np
import pytest
import torch
from repo_paths import REPO


def _script():
    spec = importlib.util.spec_from_file_location("last_epoch", REPO / "benchmarks" / "last_epoch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


last_epoch = _script()


def _outputs(model):
    with np.load(model / "outputs.npz") as stored:
        return {name: stored[name] for name in stored.files}


def _same(a, b) -> bool:
    return sorted(a) == sorted(b) and all(np.allclose(a[k], b[k], rtol=1e-5, atol=1e-6) for k in a)


def test_the_copy_keeps_the_last_epoch_and_its_outputs_come_again_from_it(tiny_run, tiny_config, real_data_dir,
                                                                         tmp_path, capsys):
    """The copy's outputs come from the last epoch: equal to the run's where the run kept its last
    epoch anyway, different where it kept an earlier one, and a copy of the copy (whose models keep
    their last epoch already) computes the same outputs again."""
    from runs import reproduce_args, run_cli, snapshot

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    before = snapshot(run)
    copies = [tmp_path / "copy", tmp_path / "copy-of-copy"]
    outputs = []
    for source, copy in zip([run, copies[0]], copies):
        assert last_epoch.main([str(source), str(copy), "--approaches", "entropic"]) == 0
        model = copy / "seed0" / "entropic"
        best, last = (torch.load(model / name, weights_only=True) for name in ("best.pt", "last.pt"))
        assert best["epoch"] == last["epoch"] == 2 and set(best) == {"model", "epoch", "val_loss", "config"}
        assert all(torch.equal(best["model"][k], last["model"][k]) for k in last["model"])
        assert not (model / "outputs.npz").exists() and not (copy / "comparison.json").exists()
        assert (copy / "seed0" / "softmax" / "outputs.npz").exists()  # the other approaches' are the run's
        result = run_cli(reproduce_args(tiny_config, copy, real_data_dir))
        assert result.returncode == 0, result.stderr
        outputs.append(_outputs(model))
    assert snapshot(run) == before  # the run is read, never written
    kept = torch.load(run / "seed0" / "entropic" / "best.pt", weights_only=True)["epoch"]
    assert f"kept epoch {kept} " in capsys.readouterr().out
    assert _same(outputs[0], outputs[1])
    assert _same(outputs[0], _outputs(run / "seed0" / "entropic")) == (kept == 2)


def test_the_copy_is_refused_over_an_existing_folder_and_without_the_approach(tiny_run, tmp_path):
    (tmp_path / "copy").mkdir()
    with pytest.raises(SystemExit, match="exists"):
        last_epoch.main([str(tiny_run), str(tmp_path / "copy"), "--approaches", "entropic"])
    with pytest.raises(SystemExit, match="no model of vos"):
        last_epoch.main([str(tiny_run), str(tmp_path / "other"), "--approaches", "vos"])
