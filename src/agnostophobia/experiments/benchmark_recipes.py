"""The training recipes a benchmark's report prints (:mod:`agnostophobia.experiments.benchmark_report`,
"Training recipes"): the budget's one recipe for the approaches trained from scratch, each
fine-tune's authors' recipe and where this run departs from it, and the mark its rows carry then."""
from __future__ import annotations

from typing import Dict, List, Optional

#: The mark beside a fine-tune's row that departs from its authors' recipe, and what it is about (and
#: what it leaves to the protocol).
RECIPE_MARK = "not the authors' recipe"
RECIPE_MARK_COVERS = (f"The mark *{RECIPE_MARK}* is about a fine-tune's own recipe: optimiser, learning rate against "
                      f"the start network's, schedule, epochs, batches, and the loss's margins and weights. The "
                      f"network and the negatives are the protocol's for every approach, fine-tuned or not, and mark "
                      f"no row.")


def departs_from_recipe(result: Dict, approach: str) -> bool:
    """Whether ``approach`` fine-tunes with its authors' recipe and departs from it (``recipes``)."""
    recipe = result.get("recipes", {}).get(approach, {})
    return bool(recipe.get("start") and recipe.get("differs"))


def recipe_mark(result: Dict, approach: str) -> str:
    return f" ({RECIPE_MARK})" if departs_from_recipe(result, approach) else ""


def recipes_section(result: Dict) -> List[str]:
    """How each approach trained: the fine-tunes' authors' recipes, where they come from and what
    departs from them here; every other approach from scratch with the budget's one recipe."""
    recipes = result.get("recipes")
    if not recipes:
        return []
    scratch = [a for a, r in recipes.items() if not r.get("start")]
    lines = ["## Training recipes", ""]
    if scratch:
        lines.append(f"From scratch, with the budget's recipe (budget {result['meta'].get('budget')}"
                     f"{_budget_recipe_said(result.get('budget_recipe'))}; the same for every approach, which differ "
                     f"by their loss, by the negatives of those trained with them and by the output layer their "
                     f"loss declares): {', '.join(scratch)}.")
    if any(r.get("start") for r in recipes.values()):
        lines.append(RECIPE_MARK_COVERS)
    for approach, r in recipes.items():
        if not r.get("start"):
            continue
        said = (f"- **{approach}**{recipe_mark(result, approach)}: fine-tunes the same seed's {r['start']} network, "
                f"{r['optimizer'].upper() if r['optimizer'] == 'sgd' else r['optimizer']} at lr {r['lr']:g}, "
                f"{r['scheduler']} schedule, {r['epochs']} epoch(s){_batches_said(r)}; the authors' recipe: "
                f"{r['source']}.")
        lines.append(said + (f" Here it departs: {r['differs']}." if r.get("differs") else ""))
    return [*lines, ""]


def _budget_recipe_said(recipe: Optional[Dict]) -> str:
    """": Adam at lr 0.003, onecycle schedule, 3 epochs, batches of 128" (nothing for an older record)."""
    if not recipe:
        return ""
    optimizer = recipe["optimizer"].upper() if recipe["optimizer"] == "sgd" else recipe["optimizer"]
    return (f": {optimizer} at lr {recipe['lr']:g}, weight decay {recipe['weight_decay']:g}, {recipe['scheduler']} "
            f"schedule, {recipe['epochs']} epoch(s), batches of {recipe['batch_size']}")


def _batches_said(recipe: Dict) -> str:
    """", batches of K knowns + N negatives" for a fine-tune drawn as its authors draw it ("": shared batches)."""
    negatives = recipe.get("negatives_per_batch")
    return f", batches of {recipe['batch_size'] - negatives} knowns + {negatives} negatives" if negatives else ""
