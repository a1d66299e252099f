/* Stand-in for bcryptprimitives.dll, which Rust's standard library imports
 * on Windows (ProcessPrng, Windows 10+) and wine 8.0 (Debian bookworm's
 * wine64) does not ship. Used only by the wine test, placed beside the
 * test program; real Windows loads its own from System32 first. */
#include <windows.h>
#include <ntsecapi.h>

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
  while (len > 0) {
    ULONG chunk = len > 0x10000000 ? 0x10000000 : (ULONG)len;
    if (!RtlGenRandom(data, chunk)) return FALSE;
    data += chunk;
    len -= chunk;
  }
  return TRUE;
}
