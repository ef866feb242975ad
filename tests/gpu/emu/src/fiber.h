/* tests/gpu/emu/src/fiber.h: execution contexts with their own stacks, switched explicitly
 * (the emulated threads of a block). Two implementations of one interface: a switch of the
 * callee-saved registers in a few instructions (x86-64; under AddressSanitizer each switch is
 * announced to it, __sanitizer_start_switch_fiber), and ucontext's swapcontext, portable but a
 * system call per switch (chosen with PT_EMU_FIBERS=ucontext, and always on other processors;
 * AddressSanitizer's swapcontext also clears the shadow of the whole stack it switches to, which
 * made the sanitizer builds' GPU tests spend most of their time in memset). */
#ifndef PT_EMU_FIBER_H
#define PT_EMU_FIBER_H

#include <cstddef>

namespace pt_emu {

struct fiber {
  void *sp = nullptr;          /* fast switch: the saved stack pointer */
  void *uc = nullptr;          /* ucontext_t, for the portable switch */
  void *stack = nullptr;       /* its stack's lowest byte and size; for the host thread's own */
  size_t stack_bytes = 0;      /* context, learnt from AddressSanitizer at its first switch */
  void (*entry)(void *) = nullptr;
  void *arg = nullptr;
};

/* A new context on a fresh stack of stack_bytes (plus a guard page) that calls entry(arg) when
 * first switched to; entry must never return. f must stay where it is while the fiber lives. */
void fiber_make(fiber &f, size_t stack_bytes, void (*entry)(void *), void *arg);
/* Saves the running context in from and resumes to. from may be a fiber never made (the host
 * thread's own context, on its first switch). */
void fiber_switch(fiber &from, fiber &to);

} // namespace pt_emu

#endif
