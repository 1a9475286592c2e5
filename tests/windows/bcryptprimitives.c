/* Wine 8.0 (Debian 12's) has no bcryptprimitives.dll, whose ProcessPrng Rust's standard
 * library calls for random bytes on Windows 10 and later (every Windows Quire supports has
 * it). tests/windows-wine.sh builds this stand-in into its throwaway Wine prefix only: the
 * same bytes from the system's generator through bcrypt.dll, which Wine has. Never shipped. */
#include <windows.h>
#include <bcrypt.h>

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len > 0) {
        ULONG chunk = len > 0x40000000 ? 0x40000000 : (ULONG)len;
        if (BCryptGenRandom(NULL, data, chunk, BCRYPT_USE_SYSTEM_PREFERRED_RNG) != 0) return FALSE;
        data += chunk;
        len -= chunk;
    }
    return TRUE;
}
