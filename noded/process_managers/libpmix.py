"""The OpenPMIx server library (``libpmix.so.2``), called through ctypes.

Only what a node daemon's PMIx service needs: start the server, register a
job's namespace and its local ranks, write each rank's environment
(``setup_fork``), complete a fence or a direct-modex request the library asked
the host for, and deregister. The layouts are the PMIx standard's (v4 and v5,
which agree on them): ``pmix_proc_t`` is a 256-byte namespace and a 32-bit
rank; info arrays are built with ``PMIx_Info_list_*`` rather than laid out by
hand; the server module is a table of function pointers in the standard's
order, the ones not given left NULL.

The library calls the module's functions on its own progress thread (ctypes
takes the GIL for them). They must return at once; a completion the host owes
(a fence's data) is called later from the daemon's thread, with a buffer held
until the library releases it (``HeldBuffers``).
"""

import ctypes
import threading
from collections.abc import Iterable
from pathlib import Path

PMIX_SUCCESS = 0
PMIX_ERR_NOT_SUPPORTED = -47
PMIX_ERR_UNREACH = -25
PMIX_ERR_OUT_OF_RESOURCE = -29
PMIX_OPERATION_SUCCEEDED = -157
PMIX_RANK_WILDCARD = 0xFFFFFFFE
NSPACE_MAX = 255

PMIX_BOOL = 1
PMIX_STRING = 3
PMIX_UINT32 = 14

MODULE_SLOTS = 64  # 28 in PMIx 4.2, a few more in 5.x: the rest NULL


class LibpmixError(Exception):
    pass


class Proc(ctypes.Structure):
    _fields_ = [("nspace", ctypes.c_char * (NSPACE_MAX + 1)), ("rank", ctypes.c_uint32)]


class DataArray(ctypes.Structure):
    _fields_ = [("type", ctypes.c_uint16), ("size", ctypes.c_size_t), ("array", ctypes.c_void_p)]


ProcPointer = ctypes.POINTER(Proc)
# void (*pmix_release_cbfunc_t)(void *cbdata)
ReleaseFunction = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
# void (*pmix_modex_cbfunc_t)(status, const char *data, size_t ndata, void *cbdata, release_fn, release_cbdata)
ModexCallback = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,
                                 ReleaseFunction, ctypes.c_void_p)
# client_connected and client_finalized: (proc, server_object, op_cbfunc, cbdata)
ClientFunction = ctypes.CFUNCTYPE(ctypes.c_int, ProcPointer, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
# abort: (proc, server_object, status, msg, procs, nprocs, op_cbfunc, cbdata)
AbortFunction = ctypes.CFUNCTYPE(ctypes.c_int, ProcPointer, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p,
                                 ProcPointer, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p)
# fence_nb: (procs, nprocs, info, ninfo, data, ndata, modex_cbfunc, cbdata)
FenceFunction = ctypes.CFUNCTYPE(ctypes.c_int, ProcPointer, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t,
                                 ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p)

# direct_modex: (proc, info, ninfo, modex_cbfunc, cbdata)
DirectModexFunction = ctypes.CFUNCTYPE(ctypes.c_int, ProcPointer, ctypes.c_void_p, ctypes.c_size_t,
                                       ctypes.c_void_p, ctypes.c_void_p)
# void (*pmix_dmodex_response_fn_t)(status, char *data, size_t sz, void *cbdata)
DmodexResponse = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)

Info = tuple[str, str | int | bool]  # a key and its value: a string, a uint32 or a bool


def proc(nspace: str, rank: int) -> Proc:
    encoded = nspace.encode()
    if len(encoded) > NSPACE_MAX:
        raise LibpmixError(f"a PMIx namespace has at most {NSPACE_MAX} bytes")
    return Proc(encoded, rank)


class HeldBuffers:
    """Buffers handed to the library, each kept alive until it calls ``release`` with its number."""

    def __init__(self) -> None:
        self._held: dict[int, ctypes.Array[ctypes.c_char]] = {}
        self._next = 1
        self._lock = threading.Lock()  # release comes on the library's thread
        self.release = ReleaseFunction(self._release)

    def hold(self, data: bytes) -> tuple[ctypes.Array[ctypes.c_char], int]:
        buffer = ctypes.create_string_buffer(data, max(1, len(data)))
        with self._lock:
            number, self._next = self._next, self._next + 1
            self._held[number] = buffer
        return buffer, number

    def _release(self, number: int | None) -> None:
        with self._lock:
            self._held.pop(number or 0, None)


class Libpmix:
    """The server functions of one loaded ``libpmix.so.2``."""

    def __init__(self, path: Path) -> None:
        try:
            # RTLD_GLOBAL: the library loads its own plug-ins, which resolve symbols against it
            self._lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
        except OSError as error:
            raise LibpmixError(f"cannot load {path}: {error}") from None
        self.path = path
        lib = self._lib
        lib.PMIx_Info_list_start.restype = ctypes.c_void_p
        lib.PMIx_Info_list_add.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_uint16]
        lib.PMIx_Info_list_convert.argtypes = [ctypes.c_void_p, ctypes.POINTER(DataArray)]
        lib.PMIx_Info_list_release.argtypes = [ctypes.c_void_p]
        lib.PMIx_Error_string.restype = ctypes.c_char_p
        lib.PMIx_Error_string.argtypes = [ctypes.c_int]
        lib.PMIx_server_init.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
        lib.PMIx_server_register_nspace.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p,
                                                    ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p]
        lib.PMIx_server_deregister_nspace.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p]
        lib.PMIx_server_deregister_nspace.restype = None
        lib.PMIx_server_register_client.argtypes = [ProcPointer, ctypes.c_uint32, ctypes.c_uint32,
                                                    ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        lib.PMIx_server_deregister_client.argtypes = [ProcPointer, ctypes.c_void_p, ctypes.c_void_p]
        lib.PMIx_server_deregister_client.restype = None
        lib.PMIx_server_setup_fork.argtypes = [ProcPointer, ctypes.POINTER(ctypes.POINTER(ctypes.c_char_p))]
        lib.PMIx_server_dmodex_request.argtypes = [ProcPointer, DmodexResponse, ctypes.c_void_p]
        lib.PMIx_server_finalize.argtypes = []

    def error(self, status: int) -> str:
        text = self._lib.PMIx_Error_string(status)
        return f"{text.decode(errors='replace') if text else 'PMIx error'} ({status})"

    def server_init(self, module: ctypes.Array[ctypes.c_void_p], info: Iterable[Info]) -> None:
        with _InfoArray(self._lib, info) as array:
            self._check("PMIx_server_init", self._lib.PMIx_server_init(module, array.array, array.size))

    def server_finalize(self) -> None:
        self._lib.PMIx_server_finalize()

    def register_nspace(self, nspace: str, local_ranks: int, info: Iterable[Info]) -> None:
        with _InfoArray(self._lib, info) as array:
            status = self._lib.PMIx_server_register_nspace(nspace.encode(), local_ranks, array.array, array.size,
                                                           None, None)
        self._check("PMIx_server_register_nspace", status)

    def deregister_nspace(self, nspace: str) -> None:
        self._lib.PMIx_server_deregister_nspace(nspace.encode(), None, None)

    def register_client(self, nspace: str, rank: int, uid: int, gid: int) -> None:
        status = self._lib.PMIx_server_register_client(ctypes.byref(proc(nspace, rank)), uid, gid, None, None, None)
        self._check("PMIx_server_register_client", status)

    def deregister_client(self, nspace: str, rank: int) -> None:
        self._lib.PMIx_server_deregister_client(ctypes.byref(proc(nspace, rank)), None, None)

    def setup_fork(self, nspace: str, rank: int) -> dict[str, str]:
        """The whole environment the library writes for a rank: its namespace, rank, the server's
        addresses, and the settings the client must share with the server."""
        environ = ctypes.POINTER(ctypes.c_char_p)()
        self._check("PMIx_server_setup_fork", self._lib.PMIx_server_setup_fork(ctypes.byref(proc(nspace, rank)),
                                                                                ctypes.byref(environ)))
        variables: dict[str, str] = {}
        index = 0
        while environ and environ[index] is not None:
            name, _, value = environ[index].decode(errors="replace").partition("=")
            variables[name] = value
            index += 1
        return variables  # the library's small array is left to it: once per task, a few hundred bytes

    def complete_modex(self, callback: int, status: int, data: bytes, cbdata: int, held: HeldBuffers) -> None:
        """Call a ``pmix_modex_cbfunc_t`` the library gave with a fence or a direct-modex request."""
        buffer, number = held.hold(data)
        ModexCallback(callback)(status, ctypes.cast(buffer, ctypes.c_void_p), len(data), cbdata, held.release,
                                number)

    def dmodex_request(self, nspace: str, rank: int, response: "ctypes._CFunctionType", cbdata: int) -> int:
        """Ask the library for a local rank's data, for another node (``response`` gets it, on the
        library's thread); the status of asking."""
        return int(self._lib.PMIx_server_dmodex_request(ctypes.byref(proc(nspace, rank)), response, cbdata))

    def _check(self, call: str, status: int) -> None:
        if status not in (PMIX_SUCCESS, PMIX_OPERATION_SUCCEEDED):
            raise LibpmixError(f"{call}: {self.error(status)}")


class _InfoArray:
    """A ``pmix_info_t`` array built by the library from (key, value) pairs, freed on leaving."""

    def __init__(self, lib: ctypes.CDLL, info: Iterable[Info]) -> None:
        self._lib = lib
        self._info = list(info)
        self._list: int | None = None
        self.array = DataArray()

    def __enter__(self) -> DataArray:
        self._list = self._lib.PMIx_Info_list_start()
        kept = []  # alive until the library copied each value
        for key, value in self._info:
            stored: ctypes.Array[ctypes.c_char] | ctypes.c_bool | ctypes.c_uint32
            if isinstance(value, bool):
                stored, kind = ctypes.c_bool(value), PMIX_BOOL
            elif isinstance(value, int):
                stored, kind = ctypes.c_uint32(value), PMIX_UINT32
            else:  # the library takes a string as its char *, a number by its address
                stored, kind = ctypes.create_string_buffer(value.encode()), PMIX_STRING
            kept.append(stored)
            status = self._lib.PMIx_Info_list_add(self._list, key.encode(), ctypes.addressof(stored), kind)
            if status != PMIX_SUCCESS:
                raise LibpmixError(f"PMIx_Info_list_add {key}: status {status}")
        self._lib.PMIx_Info_list_convert(self._list, ctypes.byref(self.array))
        return self.array

    def __exit__(self, *_: object) -> None:
        if self._list is not None:
            self._lib.PMIx_Info_list_release(self._list)
        # the converted array is the library's (PMIX_DATA_ARRAY_DESTRUCT would free it): a few
        # hundred bytes at each job's registration
