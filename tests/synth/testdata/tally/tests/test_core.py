import pytest

from tally import chunks, clamp, count_if, is_sorted, mean


def test_clamp_inside():
    assert clamp(5, 0, 10) == 5


def test_clamp_below():
    assert clamp(-3, 0, 10) == 0


def test_clamp_above():
    assert clamp(12, 0, 10) == 10


def test_mean():
    assert mean([1, 2, 3, 6]) == 3


def test_mean_of_nothing():
    with pytest.raises(ValueError):
        mean([])


def test_count_if():
    assert count_if(lambda v: v % 2 == 0, [1, 2, 4, 5, 6]) == 3


def test_chunks():
    assert chunks([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]


def test_chunks_size_zero():
    with pytest.raises(ValueError):
        chunks([1], 0)


def test_is_sorted():
    assert is_sorted([1, 1, 2, 5])


def test_is_not_sorted():
    assert not is_sorted([1, 3, 2])
