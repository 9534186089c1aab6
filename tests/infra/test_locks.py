"""``infra.locks``: one ``ablate run`` per study folder; the holder is named, and a killed
holder leaves no lock behind."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from electra_ablate.infra.errors import InputError
from electra_ablate.infra.locks import FolderLock, LockHeld, current_holder, lock_study


def test_a_held_folder_lock_names_its_holder_and_is_released_on_close(tmp_path):
    lock_file = tmp_path / "study.lock"
    first = FolderLock(lock_file)
    first.acquire()
    holder = current_holder(lock_file)
    assert holder is not None and holder.pid == os.getpid() and holder.host == socket.gethostname()
    with pytest.raises(LockHeld) as caught:
        lock_study(lock_file, tmp_path)
    message = str(caught.value)
    assert (
        str(tmp_path) in message
        and str(os.getpid()) in message
        and "run the same command again" in message
    )
    assert caught.value.exit_code == 2
    first.release()
    assert current_holder(lock_file) is None
    with lock_study(lock_file, tmp_path):
        pass


@pytest.mark.slow  # process: a holder process is killed
def test_a_killed_holder_releases_the_lock(tmp_path):
    lock_file = tmp_path / "study.lock"
    code = (
        "import sys, time; from electra_ablate.infra.locks import FolderLock; "
        f"FolderLock({str(lock_file)!r}).acquire(); print('held', flush=True); time.sleep(60)"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert current_holder(lock_file).pid == holder.pid
    finally:
        holder.kill()
        holder.wait()
    assert current_holder(lock_file) is None  # the note stays, the lock does not
    assert lock_file.exists()
    lock_study(lock_file, tmp_path).release()


def test_a_folder_that_cannot_be_written_is_an_input_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(InputError, match="cannot write"):
        FolderLock(blocker / "study" / "study.lock").acquire()
