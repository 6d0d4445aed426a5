"""Secrets never reach run.json, logs, the `runs` table or the terminal: values of secret-
looking environment variables and URL passwords are masked."""

from __future__ import annotations

from alignflow.artifacts.redact import redact, redact_tree, secret_values

ENV = {"HF_TOKEN": "hf_abcdefghijklmnop", "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG",
       "DB_PASSWORD": "hunter22", "API_KEY": "k-123", "MY_KEY_SHORT": "on",
       "PATH": "/usr/bin", "TOKENIZERS_PARALLELISM": "false", "KEY_PREFIX": "hf_abc"}


def test_secret_names_and_short_values():
    names = [n for n, _ in secret_values(ENV)]
    # TOKENIZERS_PARALLELISM matches *TOKEN* but "false" is a flag, not a secret; values
    # shorter than 4 characters are never masked ("on" would hit ordinary words)
    assert set(names) == {"HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "API_KEY",
                          "KEY_PREFIX"}
    assert redact("expected true or false", ENV) == "expected true or false"
    assert names[0] == "AWS_SECRET_ACCESS_KEY"  # longest first


def test_values_are_masked_with_their_variable_name():
    text = "login failed: token=hf_abcdefghijklmnop secret wJalrXUtnFEMI/K7MDENG pw hunter22"
    assert redact(text, ENV) == ("login failed: token=<redacted $HF_TOKEN> secret "
                                 "<redacted $AWS_SECRET_ACCESS_KEY> pw <redacted $DB_PASSWORD>")


def test_a_secret_containing_another_is_masked_whole():
    assert redact("x hf_abcdefghijklmnop y", ENV) == "x <redacted $HF_TOKEN> y"


def test_url_passwords_are_masked():
    assert redact("cannot reach https://bob:pa55word@rm.example/score (403)", {}) == \
        "cannot reach https://bob:***@rm.example/score (403)"
    assert redact("see http://host:8080/path and s3://bucket/key", {}) == \
        "see http://host:8080/path and s3://bucket/key"


def test_nothing_to_mask_and_trees():
    assert redact(None, ENV) is None and redact("", ENV) == ""
    assert redact_tree({"error": ["pw hunter22", 3], "n": None}, ENV) == \
        {"error": ["pw <redacted $DB_PASSWORD>", 3], "n": None}


def test_cli_errors_are_masked(monkeypatch, capsys, tmp_path):
    from alignflow.cli import main

    monkeypatch.setenv("SERVICE_TOKEN", "tok-9f8e7d6c5b4a")
    code = main(["status", "tok-9f8e7d6c5b4a", "--store", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "<redacted $SERVICE_TOKEN>" in err and "tok-9f8e7d6c5b4a" not in err


def test_a_url_password_in_any_variable_is_masked_alone():
    env = {"DATABASE_URL": "postgres://app:p%40ss-w0rd@db/x", "CACHE_URL": "redis://cache:6379",
           "QUEUE_URL": "amqp://guest:${QUEUE_PW}@mq/", "GIT_URL": "https://app@git.example/r"}
    assert redact("pw p%40ss-w0rd, decoded p@ss-w0rd; user app; redis://cache:6379", env) == \
        ("pw <redacted $DATABASE_URL>, decoded <redacted $DATABASE_URL>; user app; "
         "redis://cache:6379")
    assert [n for n, _ in secret_values(env)] == ["DATABASE_URL", "DATABASE_URL"]
