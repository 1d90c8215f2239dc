"""The one validating reader of a run's records: every command reads them through here.

A run directory's layout, and the path of each record, is :class:`agnostophobia.rundir.RunDir`'s.

Each reader checks what it reads (a readable file, the expected keys, types, shapes, finite
numbers) and raises :class:`RecordError`, one line naming the file and the key path, instead
of a traceback from deep inside or a value silently replaced by a default.

:func:`check_run` reads every record a command will read, before the command writes
anything, and checks that they agree (:func:`check_agreement`): a run whose records
disagree is refused and nothing in it changes.

One module per record family, each with its reader and validator, and its writer where that
is a function of the record alone at this layer or below (a writer that needs a higher layer
stays there and calls down): ``run_config`` (``config.yaml``, a checkpoint's config),
``run_meta``, ``run_marker`` (what both of these carry: the project, the run format, the run's
id), ``outputs`` (the stored outputs), ``network_state`` (a checkpoint's weights), ``last_layer``,
``detector_caches``, ``calibration``, ``tuned_settings``, ``training_summary`` (timings, wall time,
classes, notes), ``data_sources``, ``metrics``, and ``run`` (the whole run and its agreement, and
whether a folder is a run at all: :func:`is_run`, by its records' marker or agreement). Every
name is importable from here.
"""
from __future__ import annotations

from agnostophobia.rundir import DATA_NOTES, PREPROCESSING_NOTES, RecordError
from agnostophobia.training.records.calibration import read_calibration
from agnostophobia.training.records.data_sources import check_data_sources, read_data_sources
from agnostophobia.training.records.detector_caches import read_detector_scores, read_fitted_detectors
from agnostophobia.training.records.last_layer import read_last_layer, save_last_layer
from agnostophobia.training.records.metrics import read_metrics
from agnostophobia.training.records.network_state import check_network_state, read_trained_checkpoint
from agnostophobia.training.records.outputs import FIELDS, SPLIT_OF, SplitOutputs, read_outputs, save_outputs
from agnostophobia.training.records.run import (RunRecords, check_agreement, check_run, check_run_folder, is_run,
                                                run_models)
from agnostophobia.training.records.run_config import (PER_MODEL_KEYS, RESUME_FREE_KEYS, VALUE_WHEN_ABSENT,
                                                       checkpoint_config, parse_run_config, read_checkpoint_config,
                                                       read_run_config, trained_differently)
from agnostophobia.training.records.run_marker import (MARKER_KEYS, PROJECT, RUN_FORMAT, RUN_ID_KEY, marked_run_id,
                                                       new_run_id, run_marker)
from agnostophobia.training.records.run_meta import (VERSIONED, code_version, library_versions, read_run_meta,
                                                     version_mismatch)
from agnostophobia.training.records.training_summary import (check_training_records, read_classes, read_notes,
                                                             read_timings, read_wall_time)
from agnostophobia.training.records.tuned_settings import read_tuned_settings

__all__ = ["DATA_NOTES", "FIELDS", "MARKER_KEYS", "PER_MODEL_KEYS", "PREPROCESSING_NOTES", "PROJECT",
           "RESUME_FREE_KEYS", "RUN_FORMAT", "RUN_ID_KEY", "SPLIT_OF", "VALUE_WHEN_ABSENT", "VERSIONED",
           "RecordError", "RunRecords", "SplitOutputs", "check_agreement", "check_data_sources",
           "check_network_state", "check_run", "check_run_folder", "check_training_records", "checkpoint_config",
           "code_version", "is_run", "library_versions", "marked_run_id", "new_run_id", "parse_run_config",
           "read_calibration",
           "read_checkpoint_config", "read_classes", "read_data_sources", "read_detector_scores",
           "read_fitted_detectors", "read_last_layer", "read_metrics", "read_notes", "read_outputs",
           "read_run_config", "read_run_meta", "read_timings", "read_trained_checkpoint", "read_tuned_settings",
           "read_wall_time", "run_marker", "run_models", "save_last_layer", "save_outputs", "trained_differently",
           "version_mismatch"]
