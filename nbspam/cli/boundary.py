"""The one boundary where failures become one line on stderr and an exit status.

Both front ends end here: the click commands (`commands.Group`) and the one message on
stdin served before click loads (`fast_start`). Without click or numpy, so that the one-message
path can use it.
"""

from __future__ import annotations

import errno
import os
import sys

from ..errors import EXIT_INTERRUPTED, NbspamError
from .output import output_error, quiet_stdout
from .printable import printable

OUT_OF_MEMORY = (
    "out of memory: the system refused this process more (its ulimit -v, or the machine)"
)


def failure(error: BaseException, *, failed: int = 1, stdout: bool = False) -> int | None:
    """Say ``error`` in one line ``Error: ...`` on stderr and return the exit status; None
    where it is not a failure to say this way (a defect with NBSPAM_TRACEBACK set, or not
    an Exception at all): the caller raises it again.

    The library's errors keep their status; Ctrl-C is 'interrupted', status 130; a failed
    system call (a full disk, say) is its message and ``failed``, naming standard output
    where it was the output (``stdout``: an error without a file name can only be stdout);
    a reader of the output that went away (EPIPE) ends quietly with ``failed``; memory
    refused (`MemoryError`) is `OUT_OF_MEMORY`; anything else is an 'internal error', the
    details on request.
    """
    if isinstance(error, NbspamError):
        line, status = str(error), error.exit_code
    elif isinstance(error, KeyboardInterrupt):
        line, status = "interrupted", EXIT_INTERRUPTED
    elif isinstance(error, OSError) and error.errno == errno.EPIPE:
        quiet_stdout()
        return failed
    elif isinstance(error, OSError):
        line = output_error(error, stdout=stdout and error.filename is None)
        status = failed
    elif isinstance(error, MemoryError) and not os.environ.get("NBSPAM_TRACEBACK"):
        line, status = OUT_OF_MEMORY, failed
    elif isinstance(error, Exception) and not os.environ.get("NBSPAM_TRACEBACK"):
        line = f"internal error: {error!r} (set NBSPAM_TRACEBACK=1 to see where)"
        status = failed
    else:
        return None
    print(f"Error: {printable(line)}", file=sys.stderr)
    return status
