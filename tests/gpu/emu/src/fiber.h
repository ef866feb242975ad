/* tests/gpu/emu/src/fiber.h: execution contexts with their own stacks, switched explicitly
 * (the emulated threads of a block). Two implementations of one interface: a switch of the
 * callee-saved registers in a few instructions (x86-64), and ucontext's swapcontext, portable but
 * a system call per switch (chosen with PT_EMU_FIBERS=ucontext, and always under
 * AddressSanitizer, which knows swapcontext, or on other processors). */
#ifndef PT_EMU_FIBER_H
#define PT_EMU_FIBER_H

#include <cstddef>

namespace pt_emu {

struct fiber {
  void *sp = nullptr;   /* fast switch: the saved stack pointer */
  void *uc = nullptr;   /* ucontext_t, for the portable switch */
};

/* A new context on a fresh stack of stack_bytes (plus a guard page) that calls entry(arg) when
 * first switched to; entry must never return. */
void fiber_make(fiber &f, size_t stack_bytes, void (*entry)(void *), void *arg);
/* Saves the running context in from and resumes to. from may be a fiber never made (the host
 * thread's own context, on its first switch). */
void fiber_switch(fiber &from, fiber &to);

} // namespace pt_emu

#endif
