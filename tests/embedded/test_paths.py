"""Store specs: which read as connection strings, and how messages show them without secrets."""

from __future__ import annotations

import pytest

from host_bridge.embedded.paths import HIDDEN, names_a_connection, redact_url

SECRET = "S3cr3t"

MASKED = [
    # the user info of both schemes, one host or many
    (f"postgresql://u:{SECRET}@db.example:5432/app", "postgresql://u@db.example:5432/app"),
    (f"postgres://u:{SECRET}@db/app", "postgres://u@db/app"),
    (f"postgresql://u:{SECRET}@h1,h2:5433/app", "postgresql://u@h1,h2:5433/app"),
    (f"postgresql://u:{SECRET}@[::1]:5432/app", "postgresql://u@[::1]:5432/app"),
    (f"postgresql://:{SECRET}@h/app", "postgresql://h/app"),
    (f"postgresql://u:{SECRET}@h", "postgresql://u@h"),
    (f"postgresql://u:p%40{SECRET}@h/app", "postgresql://u@h/app"),
    (f"postgresql://u:{SECRET}#x@h/app", "postgresql://u@h/app"),
    # the password query parameter: any case, percent-encoded names, repeated, among others
    (f"postgresql://u@127.0.0.1:1/db?password={SECRET}", "postgresql://u@127.0.0.1:1/db"),
    (f"postgresql://u@h/db?PassWord={SECRET}", "postgresql://u@h/db"),
    (f"postgresql://u@h/db?pass%77ord={SECRET}", "postgresql://u@h/db"),
    (f"postgresql://u@h/db?%70%61ssword={SECRET}", "postgresql://u@h/db"),
    (f"postgresql://u@h/db?pass%2577ord={SECRET}", "postgresql://u@h/db"),
    (f"postgresql://u@h/db?password={SECRET}&password=2{SECRET}", "postgresql://u@h/db"),
    (
        f"postgresql://u:{SECRET}@h1,h2/db?sslmode=disable&password={SECRET}&application_name=a",
        "postgresql://u@h1,h2/db?sslmode=disable&application_name=a",
    ),
    (f"postgres://h?password={SECRET}&", "postgres://h"),
    (f"postgresql://u:{SECRET}@h?password={SECRET}", "postgresql://u@h"),
    (f"postgresql:///db?host=%2Ftmp&password={SECRET}", "postgresql:///db?host=%2Ftmp"),
    # other secrets libpq takes as parameters
    (
        f"postgresql://h/db?sslpassword={SECRET}&oauth_client_secret={SECRET}",
        "postgresql://h/db",
    ),
    # passfile names a file: its path shows, the file is never read
    ("postgresql://u@h/db?passfile=/etc/pgpass", "postgresql://u@h/db?passfile=/etc/pgpass"),
    # another scheme, a scheme in capitals, one slash: masked the same way
    (f"POSTGRESQL://u:{SECRET}@h/db", "POSTGRESQL://u@h/db"),
    (f"mysql://u:{SECRET}@h/db?password={SECRET}", "mysql://u@h/db"),
    (f"postgresql:/u:{SECRET}@h/db", "postgresql:/u@h/db"),
    (f"  postgresql://u:{SECRET}@h/db", "postgresql://u@h/db"),
    # malformed: shown as scheme://… rather than guessed at
    (f"postgresql://u:pa@{SECRET}@h/db", f"postgresql://{HIDDEN}"),
    (f"postgresql://u:pa/{SECRET}@h/db", f"postgresql://{HIDDEN}"),
    (f"postgresql://u:12/{SECRET}@h/db", f"postgresql://{HIDDEN}"),
    (f"postgresql://u:p?{SECRET}@h/db", f"postgresql://{HIDDEN}"),
    (f"postgresql://u:{SECRET}@h:x/db", f"postgresql://{HIDDEN}"),
    (f"postgresql://u@h/db?sslmode=disable;password={SECRET}", f"postgresql://{HIDDEN}"),
    (f"postgresql://u@h/db?{SECRET}", f"postgresql://{HIDDEN}"),
    (f"postgresql://u@h/db?application_name=a@{SECRET}", f"postgresql://{HIDDEN}"),
    (f"postgresql://[::1/db?password={SECRET}", f"postgresql://{HIDDEN}"),
    # libpq keyword/value strings
    (f"host=h password={SECRET} dbname=d", "host=h dbname=d"),
    (f"host=h password = {SECRET} port=1", "host=h port=1"),
    (f"host=h password='{SECRET} with spaces' port=1", "host=h port=1"),
    (f"host=h password='it\\'s {SECRET}' port=1", "host=h port=1"),
    (f"host=h PASSWORD={SECRET} sslpassword={SECRET}", "host=h"),
    (f"password= {SECRET} port=1", "port=1"),
    (f"host=h password='{SECRET}", HIDDEN),
    (f"host=h password={SECRET}\\", HIDDEN),
]


@pytest.mark.parametrize(("spec", "shown"), MASKED)
def test_every_password_form_is_masked(spec: str, shown: str) -> None:
    assert redact_url(spec) == shown
    assert SECRET not in redact_url(spec)
    assert names_a_connection(spec)


@pytest.mark.parametrize(
    "spec",
    [
        "postgresql://u@db.example:5432/app?sslmode=require&application_name=x",
        "postgresql://h1:5432,h2:5433/app?target_session_attrs=read-write",
        "postgres://%2Fvar%2Frun%2Fpostgresql/app",
        "postgresql://",
    ],
)
def test_urls_without_passwords_are_shown_as_written(spec: str) -> None:
    assert redact_url(spec) == spec


@pytest.mark.parametrize(
    "path",
    ["sessions.sqlite3", "/var/lib/dsh/sessions.sqlite3", "./host=h", "a b/password=x", ""],
)
def test_file_paths_are_not_connection_strings_and_are_shown_as_they_are(path: str) -> None:
    assert not names_a_connection(path)
    assert redact_url(path) == path
