"""The tests are laid out like the package (docs/architecture.md, "Tests"): each module
``src/agnostophobia/<layer>/<module>.py`` has its tests in ``tests/<layer>/test_<module>.py`` (a
package's ``__init__.py`` in ``tests/<layer>/test_<layer>.py``, leading underscores dropped), or is
named in :data:`COVERED_ELSEWHERE` with the test files that cover it and why they are elsewhere."""
from __future__ import annotations

from pathlib import Path

import agnostophobia
from repo_paths import REPO, TESTS

PACKAGE = Path(agnostophobia.__file__).parent

_RECORDS = ("tests/training/records/test_records.py", "the one validating reader of run records is tested as one: "
            "each record's checks and the agreement rule, through training.records")
_DATASETS = ("tests/data/test_formats.py", "every registered dataset's on-disk formats, parametrised over DATASETS")
_FILE_PROTOCOLS = ("tests/data/file_protocols/test_file_protocols.py",
                   "protocols from files are tested through parse/build/check of the package, one pass")
_BENCHMARK = ("tests/experiments/test_benchmark.py", "the benchmark's modules (rows, ranking, comparisons, report) are "
              "tested as one, on the rows and reports its tests build")
_COMMANDS = ("tests/test_cli.py", "a command's argument parsing; its behaviour end to end in tests/commands/")


def _each_of(folder: str, modules: str, covered) -> dict:
    """One entry for each of ``modules`` (names without ``.py``) of ``folder``, all covered alike."""
    return {f"{folder}/{module}.py": covered for module in modules.split()}


#: module (relative to src/agnostophobia) -> (the test files that cover it, why not at the matching path)
COVERED_ELSEWHERE = {
    "losses/recipes.py": ("tests/training/test_fine_tune.py tests/repository/test_default_sources.py",
                          "declared facts: tested where fine-tuning and the docs' table of sources read them"),
    "training/schedules.py": ("tests/training/test_batches.py tests/training/test_fast_training.py",
                              "each schedule is checked as the trainer steps it, against its authors' formula"),
    "__init__.py": ("tests/repository/test_packaging.py", "the version and the lazy top-level names: packaging"),
    "__main__.py": ("tests/test_cli.py", "`python -m agnostophobia` is the command line's entry point"),
    "_killpoints.py": ("tests/commands/test_rerun.py tests/commands/test_reliability.py",
                       "kill points exist to be killed at: the commands killed there and run again"),
    "_lazy.py": ("tests/training/test_training.py tests/plotting/test_plotting.py tests/test_cli.py",
                 "lazy attributes: which modules an import loads (no torch for training's names, no pyplot)"),
    "_reading.py": ("tests/data/test_inputs.py tests/commands/test_hostile_inputs.py",
                    "bounded reads of every input (FIFOs, devices, sizes)"),
    "baselines/__init__.py": ("tests/baselines/test_ensemble.py", "the package re-exports the ensemble"),
    "data/__init__.py": ("tests/data/test_formats.py tests/data/test_protocols.py",
                         "the public names: formats, datasets and protocols"),
    "data/check.py": ("tests/data/test_cli.py", "`data check` is tested through its command"),
    **_each_of("data/datasets", "__init__ _base devanagari letters mnist notmnist svhn", _DATASETS),
    **_each_of("data/file_protocols", "build check csv_files folders spec", _FILE_PROTOCOLS),
    "data/fingerprint.py": ("tests/training/records/test_data_sources.py tests/commands/test_hostile_inputs.py",
                            "fingerprints exist for a run's data_sources.json"),
    "data/paper_protocols.py": ("tests/data/test_protocols.py tests/data/test_real_data.py",
                                "the paper's protocols are built in the protocol tests, on synthetic and real files"),
    "data/paths.py": ("tests/data/test_cli.py tests/data/test_fetch.py", "where data is looked for: data list, fetch"),
    "data/protocol_types.py": ("tests/data/test_protocols.py", "the protocol types, registered and built"),
    "deploy/best.py": ("tests/deploy/test_compare.py", "detector=\"best\" is the top of compare's ranking, tested beside it"),
    "deploy/calibration.py": ("tests/deploy/test_deploy.py", "calibrate, predict and export are tested as one pipeline"),
    "deploy/classifier.py": ("tests/deploy/test_deploy.py", "OpenSetClassifier, in the deployment pipeline"),
    "deploy/cli.py": ("tests/deploy/test_deploy.py tests/commands/test_last_good.py", "the deploy commands end to end"),
    "deploy/export.py": ("tests/deploy/test_deploy.py tests/detectors/test_detectors.py",
                         "export in the pipeline; each detector's torch score in the detector contract"),
    "deploy/formats.py": ("tests/deploy/test_deploy.py", "the exported files, read back"),
    "deploy/validation.py": ("tests/deploy/test_deploy.py", "the validation outputs calibrate chooses on, in the pipeline"),
    "deploy/predict.py": ("tests/deploy/test_deploy.py", "predict in the deployment pipeline"),
    "detectors/_base.py": ("tests/detectors/test_detectors.py tests/contracts/test_detector_references.py",
                           "the Detector interface, parametrised over every registered detector"),
    "detectors/_evt.py": ("tests/detectors/test_openmax.py tests/detectors/test_postmax.py",
                          "the extreme-value fits of OpenMax, EVM, PostMax and GHOST"),
    "detectors/ghost.py": ("tests/detectors/test_postmax.py", "GHOST shares PostMax's GPD fits and test module"),
    "detectors/knn.py": ("tests/detectors/test_detectors.py", "k-NN against brute force, with the interface"),
    "detectors/mahalanobis.py": ("tests/detectors/test_post_processors.py tests/detectors/test_against_pytorch_ood.py",
                                 "the seven post-processors of one issue, tested together"),
    "detectors/shaping.py": ("tests/detectors/test_post_processors.py tests/detectors/test_against_pytorch_ood.py",
                             "the seven post-processors of one issue, tested together"),
    "detectors/vim.py": ("tests/detectors/test_post_processors.py tests/detectors/test_against_pytorch_ood.py",
                         "the seven post-processors of one issue, tested together"),
    "errors.py": ("tests/commands/test_bad_inputs.py tests/commands/test_hostile_inputs.py",
                  "the errors are what every refusal raises: one line each"),
    "experiments/__init__.py": ("tests/experiments/test_tune.py tests/experiments/test_request.py",
                                "the public names of the experiments"),
    **_each_of("experiments", "benchmark_comparisons benchmark_ranking benchmark_recipes benchmark_report "
                              "benchmark_rows benchmark_summary ranking_candidates", _BENCHMARK),
    "experiments/cli.py": ("tests/test_cli.py tests/commands/test_reproduce.py", _COMMANDS[1]),
    "experiments/paper_numbers.py": ("tests/data/datasets/test_cifar.py tests/commands/test_reproduce.py",
                                     "the paper's numbers shown in a report"),
    "experiments/report.py": ("tests/commands/test_reproduce.py tests/detectors/test_stored.py",
                              "the report of a reproduction"),
    "experiments/reproduce.py": ("tests/commands/test_reproduce.py tests/commands/test_reliability.py",
                                 "reproduce end to end, killed and resumed"),
    "experiments/reproduce_ensemble.py": ("tests/baselines/test_ensemble.py", "`reproduce ensemble` with its baseline"),
    "experiments/run_metrics.py": ("tests/commands/test_reproduce.py", "a run's metrics.json, written by reproduce"),
    "experiments/run_record.py": ("tests/commands/test_reliability.py tests/commands/test_set_options.py",
                                  "what a run records of its command"),
    "losses/_base.py": ("tests/losses/test_losses.py tests/contracts/test_loss_references.py",
                        "the OpenSetLoss interface, parametrised over every registered loss"),
    "metrics/__init__.py": ("tests/metrics/test_oscr.py tests/metrics/test_ood.py", "the public metric names"),
    "metrics/_common.py": ("tests/metrics/test_oscr.py tests/metrics/test_ood.py", "input checks shared by the metrics"),
    "metrics/resolution.py": ("tests/deploy/test_compare.py", "the rule of which FPRs a validation set resolves"),
    "metrics/rows.py": ("tests/plotting/test_plotting.py tests/deploy/test_compare.py", "table rows of a run's metrics"),
    "metrics/summary.py": ("tests/metrics/test_ties.py tests/contracts/test_api_convention.py",
                           "summarize: tie shares, and the one convention over every metric"),
    "models/__init__.py": ("tests/models/test_backbones.py tests/models/test_lenetpp.py", "the model registry"),
    "models/_base.py": ("tests/models/test_backbones.py tests/models/test_smallcnn.py", "the open-set network interface"),
    "models/airbench.py": ("tests/training/test_fast_training.py", "airbench exists for the fast CPU training path"),
    "models/head.py": ("tests/models/test_backbones.py", "the open-set head on every backbone"),
    "models/mlp.py": ("tests/baselines/test_ensemble.py", "the MLP is the ensemble baseline's network"),
    "models/resnet.py": ("tests/data/datasets/test_cifar.py tests/test_plugins.py", "ResNet-18 of the CIFAR experiment"),
    "plotting/cli.py": ("tests/plotting/test_plotting.py", "`plot` with the figures"),
    "plotting/comparison.py": ("tests/plotting/test_plotting.py", "the comparison figures with the others"),
    "plotting/curves.py": ("tests/plotting/test_plotting.py", "the OSCR and confidence curves of every figure"),
    "plotting/features.py": ("tests/plotting/test_plotting.py", "the deep-feature panels of every figure"),
    "plotting/histograms.py": ("tests/plotting/test_plotting.py", "the histogram panels of every figure"),
    "plotting/panels.py": ("tests/plotting/test_plotting.py", "the panels of every figure"),
    "plotting/style.py": ("tests/plotting/test_plotting.py", "the style of every figure"),
    "registry.py": ("tests/commands/test_hostile_inputs.py tests/test_plugins.py tests/contracts/test_adding_things.py",
                    "registries: names refused, plugins added, contracts over every registered name"),
    "training/adversarial.py": ("tests/training/test_trainer.py tests/baselines/test_ensemble.py", "FGSM in training"),
    "training/allocator.py": ("tests/commands/test_reproduce.py", "called once by every command (a malloc setting; "
                              "its effect is measured by benchmarks/bench_roofline.py, not asserted)"),
    "training/augment.py": ("tests/training/test_trainer.py tests/training/test_seed_batch.py", "augmentation in training"),
    "training/auto_options.py": ("tests/training/test_precision.py tests/training/test_fast_training.py",
                                 "the options decided per device"),
    "training/checkpoint.py": ("tests/training/test_trainer.py tests/training/test_reliability.py",
                               "checkpoints: atomic, resumed, from elsewhere"),
    "training/compiled.py": ("tests/training/test_fast_training.py", "torch.compile on the fast path"),
    "training/config.py": ("tests/training/test_trainer.py tests/test_yaml.py", "configs with the trainer and YAML"),
    "training/device.py": ("tests/test_validation.py tests/training/test_reliability.py", "device choice and checks"),
    "training/fitting.py": ("tests/training/test_trainer.py tests/training/test_seed_batch.py",
                            "fit and fit_seeds are the trainer's entry points, tested with its loop"),
    "training/epoch_log.py": ("tests/training/test_trainer.py", "the epoch log a training writes"),
    "training/loaders.py": ("tests/data/test_streaming.py tests/training/test_trainer.py", "the training batches"),
    "training/loss_keys.py": ("tests/training/test_trainer.py tests/losses/test_logitnorm.py",
                              "a config's loss keys moved home, as configs are parsed"),
    "training/model_kwargs.py": ("tests/commands/test_bad_inputs.py",
                                 "a config's model_kwargs refused as configs are parsed, by the commands"),
    "training/outputs.py": ("tests/training/records/test_records.py tests/experiments/test_tune_detectors.py",
                            "the network's outputs, saved and read"),
    **_each_of("training/records", "_common calibration detector_caches last_layer metrics network_state outputs "
               "run run_config run_marker run_meta training_summary tuned_settings", _RECORDS),
    "training/resume.py": ("tests/training/test_trainer.py tests/training/test_reliability.py", "resume after a stop"),
    "training/trained.py": ("tests/deploy/test_deploy.py tests/training/test_training.py", "a trained model, loaded"),
}


def matching_test(module: Path) -> Path:
    """``tests/<layer>/test_<module>.py`` for ``<layer>/<module>.py``; ``tests/<layer>/test_<layer>.py``
    for ``<layer>/__init__.py`` (the package itself: ``tests/test_agnostophobia.py``)."""
    relative = module.relative_to(PACKAGE)
    if relative.name == "__init__.py":
        return TESTS / relative.parent / f"test_{relative.parent.name or 'agnostophobia'}.py"
    return TESTS / relative.parent / f"test_{relative.stem.lstrip('_')}.py"


def modules():
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_module_has_its_test_file_or_says_where_it_is_tested():
    untested = [str(p.relative_to(PACKAGE)) for p in modules()
                if not matching_test(p).is_file() and str(p.relative_to(PACKAGE)) not in COVERED_ELSEWHERE]
    assert untested == [], ("add tests/<layer>/test_<module>.py, or name the module in COVERED_ELSEWHERE "
                            "with the test files that cover it and why")


def test_no_entry_of_the_list_is_stale():
    """An entry for a module that is gone, or that now has its own test file, or that names a test file
    that is gone, says something false."""
    present = {str(p.relative_to(PACKAGE)): p for p in modules()}
    gone = [name for name in COVERED_ELSEWHERE if name not in present]
    own_file = [name for name, path in present.items() if name in COVERED_ELSEWHERE and matching_test(path).is_file()]
    missing = [(name, test) for name, (tests, _) in COVERED_ELSEWHERE.items() for test in tests.split()
               if not (REPO / test).is_file()]
    assert (gone, own_file, missing) == ([], [], [])


def test_a_module_without_a_test_file_is_found(tmp_path, monkeypatch):
    """The check can fail: a module added to the package with no test file and no entry is named."""
    monkeypatch.setattr(__import__(__name__, fromlist=["PACKAGE"]), "PACKAGE", tmp_path)
    (tmp_path / "losses").mkdir()
    (tmp_path / "losses" / "new_loss.py").write_text("")
    assert matching_test(tmp_path / "losses" / "new_loss.py") == TESTS / "losses" / "test_new_loss.py"
    assert [str(p.relative_to(tmp_path)) for p in modules() if not matching_test(p).is_file()] == ["losses/new_loss.py"]
