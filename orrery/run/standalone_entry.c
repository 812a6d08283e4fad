/* The entry point that makes a program linked by Orrery's wrappers directly executable.
 *
 * SMPI links a program as a shared object, which smpirun dlopens once per rank: run on its own
 * (as configure runs its test programs), such an object has no entry and crashes. The wrappers
 * link this file into every program (never into a -shared library) and name its
 * orrery_standalone_entry as the ELF entry point. The object has no PT_INTERP, so the kernel
 * loads it without the dynamic loader and jumps here with nothing relocated and no library
 * loaded: the code below uses no relocated data, no libc and no stack protector, only system
 * calls. It execs Orrery (python -P -m orrery.run.standalone PROGRAM ARGS...), which runs the
 * program as one simulated rank through `orrery run`'s machinery. Under `orrery run`, smpirun
 * dlopens the program and the entry point is never used.
 *
 * The wrapper compiles this file at each link with ORRERY_PYTHON defined as the bytes of its own
 * Python interpreter's path, e.g. -DORRERY_PYTHON=47,117,115,114,0 ("/usr" and its NUL).
 */
#include <sys/syscall.h>

#ifndef ORRERY_PYTHON
#error "ORRERY_PYTHON: the bytes of the Python interpreter's path, NUL-terminated"
#endif

#define AT_FDCWD_ (-100)

static long orrery_syscall(long n, long a, long b, long c, long d) {
  long r;
#if defined(__x86_64__)
  register long r10 __asm__("r10") = d;
  __asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10) : "rcx", "r11", "memory");
#elif defined(__aarch64__)
  register long x8 __asm__("x8") = n;
  register long x0 __asm__("x0") = a;
  register long x1 __asm__("x1") = b;
  register long x2 __asm__("x2") = c;
  register long x3 __asm__("x3") = d;
  __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory");
  r = x0;
#else
#error "Orrery's stand-alone entry point supports x86_64 and aarch64"
#endif
  return r;
}

static long length(const char* s) {
  long n = 0;
  while (s[n])
    n++;
  return n;
}

static void say(const char* s) { orrery_syscall(SYS_write, 2, (long)s, length(s), 0); }

/* sp: the initial process stack, argc then argv[] and NULL, then envp[] and NULL. */
__attribute__((used, noreturn)) static void orrery_standalone_start(long* sp) {
  static const char python[] = {ORRERY_PYTHON};
  static const char isolate[] = "-P";  // the current folder's own orrery/ (a checkout) is not imported
  static const char module_flag[] = "-m";
  static const char module[] = "orrery.run.standalone";
  static const char self[] = "/proc/self/exe";
  long argc = sp[0];
  char** argv = (char**)(sp + 1);
  char** envp = argv + argc + 1;
  char program[4096];
  long n = orrery_syscall(SYS_readlinkat, AT_FDCWD_, (long)self, (long)program, sizeof program - 1);
  if (n > 0)
    program[n] = 0;
  char* args[argc + 5];
  args[0] = (char*)python;
  args[1] = (char*)isolate;
  args[2] = (char*)module_flag;
  args[3] = (char*)module;
  args[4] = n > 0 ? program : argv[0];
  for (long i = 1; i <= argc; i++)  // the program's own arguments and argv's NULL
    args[4 + i] = argv[i];
  orrery_syscall(SYS_execve, (long)python, (long)args, (long)envp, 0);
  say("orrery: this program was built with Orrery's compiler wrappers and runs through Orrery, but the "
      "Python that built it cannot be started: ");
  say(python);
  say("\norrery: run it with `orrery run` from an installed Orrery\n");
  orrery_syscall(SYS_exit_group, 127, 0, 0, 0);
  for (;;) {
  }
}

/* The kernel enters with the stack pointer at argc (16-byte aligned, no return address). */
__asm__(
    ".text\n"
    ".globl orrery_standalone_entry\n"
    ".hidden orrery_standalone_entry\n"
    ".type orrery_standalone_entry, %function\n"
    "orrery_standalone_entry:\n"
#if defined(__x86_64__)
    "  mov %rsp, %rdi\n"
    "  and $-16, %rsp\n"
    "  call orrery_standalone_start\n"
    "  hlt\n"
#elif defined(__aarch64__)
    "  mov x0, sp\n"
    "  bl orrery_standalone_start\n"
    "  brk #0\n"
#endif
    ".size orrery_standalone_entry, .-orrery_standalone_entry\n");
