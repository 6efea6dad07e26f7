"""Counterfactual evaluation over recorded sessions (``mibyan eval``): fork each selected
session at chosen points onto one or more configurations, and pair the forks' outcomes with
the recorded ones.

    from pipeline.eval import Configuration, EvalSpec, evaluate
    report = evaluate(EvalSpec(home=Path("~/.mibyan").expanduser(), out=Path("eval1"),
                               configs=(Configuration.of("mini", model="gpt-4o-mini"),)))
    print("\\n".join(report.lines()))
"""

from pipeline.eval.evaluate import evaluate
from pipeline.eval.report import EvalReport, Row
from pipeline.eval.scorers import Sample
from pipeline.eval.spec import Configuration, EvalSpec, load_configurations

__all__ = ["Configuration", "EvalReport", "EvalSpec", "Row", "Sample", "evaluate",
           "load_configurations"]
