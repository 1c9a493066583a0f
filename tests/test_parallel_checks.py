"""Lesson 06's exercise checks: right answers pass, the usual mistakes get a hint, stubs say "not done"."""

from __future__ import annotations

import course.check
from course.parallel import average_gradients, bytes_per_worker, ring_chunks


def _stub(*args):
    raise NotImplementedError


def test_the_checks_are_exported_through_course_check():
    for name in ("check_ring_chunks", "check_bytes_per_worker", "check_gradient_average"):
        assert name in course.check.__all__


def test_right_answers_pass(capsys):
    assert course.check.check_ring_chunks(ring_chunks)
    assert course.check.check_bytes_per_worker(bytes_per_worker)
    assert course.check.check_gradient_average(average_gradients)
    assert capsys.readouterr().out.count("Correct") == 3


def test_stubs_are_not_done_yet(capsys):
    for check in (course.check.check_ring_chunks, course.check.check_bytes_per_worker,
                  course.check.check_gradient_average):
        assert not check(_stub)
    assert capsys.readouterr().out.count("Not done yet") == 3


def test_sending_left_instead_of_right_gets_a_hint(capsys):
    assert not course.check.check_ring_chunks(lambda r, s, p: ((r + s) % p, (r + s + 1) % p))
    out = capsys.readouterr().out
    assert "RIGHT" in out or "LEFT" in out


def test_adding_into_the_sent_chunk_gets_a_hint(capsys):
    assert not course.check.check_ring_chunks(lambda r, s, p: ((r - s) % p, (r - s) % p))
    assert "you add into the chunk you send" in capsys.readouterr().out.lower()


def test_forgetting_the_ring_s_second_phase_or_the_itemsize_gets_a_hint(capsys):
    assert not course.check.check_bytes_per_worker(
        lambda a, n, p, i: (p - 1) / p * n * i if a == "ring" else (p - 1) * n * i)
    assert "TWO phases" in capsys.readouterr().out
    assert not course.check.check_bytes_per_worker(
        lambda a, n, p, i: 2 * (p - 1) / p * n if a == "ring" else (p - 1) * n)
    assert "itemsize" in capsys.readouterr().out


def test_a_plain_mean_over_unequal_shards_gets_a_hint(capsys):
    def plain_mean(grads, sizes):
        return [sum(g[i] for g in grads) / len(grads) for i in range(len(grads[0]))]
    assert not course.check.check_gradient_average(plain_mean)
    assert "share of the batch" in capsys.readouterr().out


def test_a_learner_bug_is_reported_not_raised(capsys):
    assert not course.check.check_gradient_average(lambda g, s: 1 / 0)
    assert "ZeroDivisionError" in capsys.readouterr().out
