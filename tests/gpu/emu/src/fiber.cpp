/* Fibers (fiber.h). The fast switch pushes the callee-saved registers on the running stack,
 * stores the stack pointer, loads the other one and pops the same; a new fiber's stack is laid
 * out as if it had been switched away from just before entering pt_emu_fiber_start, which calls
 * fiber_begin(&f), and that entry(arg). The SSE and x87 control words are not switched: kernels
 * never change them. Under AddressSanitizer every fast switch is announced before (the stack it
 * goes to) and confirmed after (the sanitizer's documented fiber protocol), so the sanitizer
 * knows which stack is live without swapcontext's shadow clearing. */
#include "fiber.h"

#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "internal.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define PT_EMU_ASAN 1
#else
#define PT_EMU_ASAN 0
#endif

#if defined(__x86_64__) && !(defined(__CET__) && (__CET__ & 2))
#define PT_EMU_FAST_SWITCH 1
extern "C" void pt_emu_swap_sp(void **save_sp, void *load_sp);
extern "C" void pt_emu_fiber_start(void);
asm(R"(
  .text
  .globl pt_emu_swap_sp
  .type pt_emu_swap_sp, @function
pt_emu_swap_sp:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size pt_emu_swap_sp, .-pt_emu_swap_sp
  .globl pt_emu_fiber_start
  .type pt_emu_fiber_start, @function
pt_emu_fiber_start:
  movq %r12, %rdi
  callq *%r13
  ud2
  .size pt_emu_fiber_start, .-pt_emu_fiber_start
)");
#else
#define PT_EMU_FAST_SWITCH 0
#endif

namespace pt_emu {

namespace {
bool use_fast() { return PT_EMU_FAST_SWITCH && !cfg().ucontext; }

/* The context a fast switch leaves; the one it lands in completes the sanitizer's protocol and,
 * the first time the host thread's context is left, records that context's stack. */
[[maybe_unused]] thread_local fiber *g_leaving;

[[maybe_unused]] void switch_landed(void *fake_stack) {
#if PT_EMU_ASAN
  const void *bottom = nullptr;
  size_t size = 0;
  __sanitizer_finish_switch_fiber(fake_stack, &bottom, &size);
  if (g_leaving && !g_leaving->stack) {
    g_leaving->stack = const_cast<void *>(bottom);
    g_leaving->stack_bytes = size;
  }
#else
  (void)fake_stack;
#endif
}

/* Where every fiber starts (on its own stack, first switched to). */
[[maybe_unused]] void fiber_begin(void *p) {
  fiber &f = *static_cast<fiber *>(p);
  switch_landed(nullptr);
  f.entry(f.arg);
}

/* stack_bytes usable, above a guard page that turns an overflow into a fault. */
char *new_stack(size_t stack_bytes) {
  long page = sysconf(_SC_PAGESIZE);
  if (page <= 0) fail("sysconf(_SC_PAGESIZE) failed");
  size_t guard = static_cast<size_t>(page);
  void *p = mmap(nullptr, stack_bytes + guard, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (p == MAP_FAILED) fail("mmap of a %zu-byte fiber stack failed: %s", stack_bytes, strerror(errno));
  if (mprotect(p, guard, PROT_NONE) != 0) fail("mprotect of a fiber stack's guard page failed");
  return static_cast<char *>(p) + guard;
}

/* ucontext passes int arguments only: the pointers in halves. */
void uc_entry(int e_hi, int e_lo, int a_hi, int a_lo) {
  auto join = [](int hi, int lo) {
    return (static_cast<uintptr_t>(static_cast<unsigned>(hi)) << 32) | static_cast<unsigned>(lo);
  };
  auto entry = reinterpret_cast<void (*)(void *)>(join(e_hi, e_lo));
  entry(reinterpret_cast<void *>(join(a_hi, a_lo)));
}

ucontext_t *uc_of(fiber &f) {
  if (!f.uc) f.uc = new ucontext_t();
  return static_cast<ucontext_t *>(f.uc);
}
} // namespace

void fiber_make(fiber &f, size_t stack_bytes, void (*entry)(void *), void *arg) {
  char *stack = new_stack(stack_bytes);
  f.stack = stack;
  f.stack_bytes = stack_bytes;
  f.entry = entry;
  f.arg = arg;
  if (use_fast()) {
#if PT_EMU_FAST_SWITCH
    uintptr_t top = (reinterpret_cast<uintptr_t>(stack) + stack_bytes) & ~uintptr_t(15);
    uint64_t *sp = reinterpret_cast<uint64_t *>(top);
    *--sp = reinterpret_cast<uint64_t>(&pt_emu_fiber_start); /* ret target; rsp 16-aligned after */
    *--sp = 0;                                               /* rbp */
    *--sp = 0;                                               /* rbx */
    *--sp = reinterpret_cast<uint64_t>(&f);                  /* r12: fiber_begin's argument */
    *--sp = reinterpret_cast<uint64_t>(&fiber_begin);        /* r13 */
    *--sp = 0;                                               /* r14 */
    *--sp = 0;                                               /* r15 */
    f.sp = sp;
#endif
    return;
  }
  ucontext_t *uc = uc_of(f);
  if (getcontext(uc) != 0) fail("getcontext failed: %s", strerror(errno));
  uc->uc_stack.ss_sp = stack;
  uc->uc_stack.ss_size = stack_bytes;
  uc->uc_link = nullptr;
  uintptr_t e = reinterpret_cast<uintptr_t>(entry), a = reinterpret_cast<uintptr_t>(arg);
  /* swapcontext is intercepted by AddressSanitizer (its own bookkeeping): no fiber_begin */
  makecontext(uc, reinterpret_cast<void (*)()>(uc_entry), 4, static_cast<int>(e >> 32),
              static_cast<int>(e & 0xffffffffu), static_cast<int>(a >> 32),
              static_cast<int>(a & 0xffffffffu));
}

void fiber_switch(fiber &from, fiber &to) {
#if PT_EMU_FAST_SWITCH
  if (use_fast()) {
#if PT_EMU_ASAN
    void *fake_stack = nullptr;
    g_leaving = &from;
    __sanitizer_start_switch_fiber(&fake_stack, to.stack, to.stack_bytes);
    pt_emu_swap_sp(&from.sp, to.sp);
    switch_landed(fake_stack);
#else
    pt_emu_swap_sp(&from.sp, to.sp);
#endif
    return;
  }
#endif
  if (swapcontext(uc_of(from), uc_of(to)) != 0) fail("swapcontext failed: %s", strerror(errno));
}

} // namespace pt_emu
