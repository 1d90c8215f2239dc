"""Where an experiment config's loss hyper-parameters live: under ``loss:``, spelled as the loss's
keyword, named as the loss declares them now.

Older configs and records set Objectosphere's ``xi`` and ``lambda`` (Eq. 2) as top-level keys, and
some settings had other names (``logitnorm_temperature``); these are read into their one home
(:func:`with_loss_keys_moved`) with a note (:func:`legacy_loss_note`), and two configs are
compared on what they train (:func:`comparable_config`).
"""
from __future__ import annotations

from typing import Any, Dict, Optional

from agnostophobia.errors import ConfigError
from agnostophobia.losses import LOSSES, current_setting_names, loss_settings, renamed_loss_settings


# YAML spellings of loss hyper-parameters whose Python name differs ("lambda" is a Python keyword).
LOSS_ALIASES = {"lambda": "lambda_"}
# Objectosphere's xi and lambda (Eq. 2) were top-level keys until losses declared their settings;
# a config or record that sets them there still loads, with them moved under ``loss:``.
LEGACY_LOSS_KEYS = {"xi": "xi", "lambda": "lambda_", "lambda_": "lambda_"}


def with_loss_keys_moved(values: Dict[str, Any], base_loss: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """``values`` (a config's keys) with the loss hyper-parameters in their one home: the old
    top-level ``xi`` / ``lambda`` moved under ``loss:`` (on top of ``base_loss``, the loss
    settings they override), ``loss: {lambda: ...}`` spelled as the keyword ``lambda_``, and a
    setting's former name (``logitnorm_temperature``) read as its name now (``temperature``).
    The same value set in both places is one setting; two values are a :class:`ConfigError`."""
    legacy = {key: values[key] for key in LEGACY_LOSS_KEYS if key in values}
    own = values.get("loss") or {}
    if not isinstance(own, dict) or not (legacy or "loss" in values or base_loss):
        return values  # nothing to move, or a malformed loss: the config check names it
    own = {LOSS_ALIASES.get(key, key): value for key, value in own.items()}
    own = current_setting_names(own, renamed_loss_settings(), "config key 'loss'")
    for key, value in legacy.items():
        keyword = LEGACY_LOSS_KEYS[key]
        if keyword in own and own[keyword] != value:
            raise ConfigError(f"config keys {key!r} and 'loss.{keyword}' disagree ({value!r} and {own[keyword]!r}); "
                              f"set it once, under loss:")
        own[keyword] = value
    moved = {k: v for k, v in values.items() if k not in legacy}
    moved["loss"] = {**(base_loss or {}), **own}  # a budget changes the settings it names, keeps the rest
    return moved


def legacy_loss_note(data: Dict[str, Any]) -> Optional[str]:
    """The one line a config with top-level ``xi`` / ``lambda``, or a loss setting's former name
    (here or in a budget), gets."""
    levels = [("", data)] + [(f"budgets.{name}.", values) for name, values in (data.get("budgets") or {}).items()
                             if isinstance(values, dict)]
    found = [prefix + key for prefix, level in levels for key in LEGACY_LOSS_KEYS if key in level]
    renamed = renamed_loss_settings()
    former = [(f"{prefix}loss.{key}", renamed[key]) for prefix, level in levels
              if isinstance(level.get("loss"), dict) for key in level["loss"] if key in renamed]
    notes = [f"config key{'s' * (len(found) > 1)} {', '.join(found)}: read as loss.xi / loss.lambda; "
             f"Objectosphere's hyper-parameters live under loss: now (loss: {{xi: 50, lambda: 1.0e-4}})"] * bool(found)
    notes += [f"config key {key}: read as loss.{name}, its name now" for key, name in former]
    return "note: " + "; ".join(notes) if notes else None


def comparable_config(values: Dict[str, Any]) -> Dict[str, Any]:
    """A config's keys (a checkpoint's, a config.yaml's, a running config's ``to_dict()``) in one
    form for comparing what was trained: loss hyper-parameters moved home, and those at their
    declared default left out (old records state xi = 50 and lambda = 1e-4 for every approach)."""
    values = with_loss_keys_moved(values)
    loss = values.get("loss")
    if isinstance(loss, dict):
        approach = values.get("approach")
        own = loss_settings(approach) if isinstance(approach, str) and approach in LOSSES else {}
        values = {**values, "loss": {k: v for k, v in loss.items() if not _at_default(k, v, own)}}
    return values


def _at_default(keyword: str, value, own: Dict) -> bool:
    """Whether a loss setting holds its declared default: the approach's own loss's where it
    reads ``keyword``, else any registered loss's that declares it (a key the approach never reads)."""
    if keyword in own:
        return value == own[keyword].default
    return any(keyword in declared and value == declared[keyword].default
               for declared in map(loss_settings, LOSSES.registered()))
