from pathlib import Path


def test_the_file_exists():
    assert Path("/app/greeting.txt").is_file()


def test_the_file_holds_the_greeting():
    assert Path("/app/greeting.txt").read_text() == "Hello, terminal!\n"
