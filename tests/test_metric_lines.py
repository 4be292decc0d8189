"""A paste of step metrics alone is recognised; a NaN in it, or a sentence, or an error is not that."""

from pathlib import Path

from kb.text.metric_lines import only_metrics

HEALTHY = (Path(__file__).resolve().parent.parent / "eval/healthy/public-verl-step-metrics.log").read_text().splitlines()


def test_healthy_step_metrics_are_only_metrics() -> None:
    assert only_metrics("\n".join(HEALTHY[:3]))
    assert only_metrics(HEALTHY[1])


def test_a_nan_or_inf_value_is_a_symptom_not_only_metrics() -> None:
    assert not only_metrics(HEALTHY[1].replace("actor/grad_norm:0.020", "actor/grad_norm:nan"))
    assert not only_metrics(HEALTHY[1].replace("actor/pg_loss:0.001", "actor/pg_loss: inf"))


def test_words_or_an_error_around_metrics_are_not_only_metrics() -> None:
    assert not only_metrics("my reward is flat with GRPO, loss:0.5 step:3 lr:1e-6, what should I check in the config")
    assert not only_metrics("RuntimeError: CUDA error: an illegal memory access was encountered\nstep:1 - a:1 - b:2")
    assert not only_metrics("step:3")  # one pair is not a metrics line
