// cpu_relax(): the pause a spinning thread puts between two looks at a shared word. It tells
// the core that this is a spin (x86 PAUSE, aarch64 YIELD), so a hyper-threaded sibling gets
// the pipeline and the exit from the spin does not pay a memory-order mis-speculation. Every
// spin-then-sleep loop in libkvreg (shard locks, the event ring, the poll queue, the index's
// seqlocks) calls this one function; elsewhere it compiles to nothing.
#pragma once

namespace kvreg {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

} // namespace kvreg
