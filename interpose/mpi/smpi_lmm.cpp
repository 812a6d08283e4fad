/* liborrery_smpi.so: SimGrid's selective bandwidth update, told every link a flow crosses.
 *
 * SimGrid shares each link's bandwidth between the flows crossing it by solving a max-min
 * system (src/kernel/lmm/System.cpp): a variable per flow, a constraint per link. Its selective
 * update solves again only the constraints marked modified since the last solve, and the
 * constraints reachable from them through enabled variables. When a flow's variable changes (its
 * latency ends and it starts sharing, it is disabled, it ends), SimGrid 3.32 (and its master of
 * 2026-08) marks only the variable's FIRST constraint, System::update_modified_cnst_set_from_variable,
 * on the reasoning that marking it walks to the others. It does not when that first constraint
 * is already marked: the walk then never runs, and the flow's other links are left out of the
 * next solve. Four flows starting at the same instant, from two senders to two receivers:
 *
 *     s1 -> r1, s1 -> r2, s2 -> r1, s2 -> r2, 1 MB each; up-links 1 TB/s, down-links 1 GB/s
 *
 * the second flow's latency ends after the first's marked s1's up-link: r2's down-link is never
 * marked, and both flows into r2 go at 1 GB/s each through it, ending at 1 ms instead of 2 ms.
 * NCCL's all-to-all on 2 dgx-h100 nodes sent eight transfers at 50 GB/s each through one 50 GB/s
 * NIC this way (tests/native/test_nccl.py); 8 copies at once on dgx-a100 went at their lone rate
 * through a shared PCIe switch; a flow that ends frees its bandwidth only on its first link.
 * `orrery run` therefore had to solve every link at every event (network/optim:Full without
 * the selective update), whose cost grows with the flows in flight: a quarter of a 4096-GPU run.
 *
 * The stand-in marks every constraint of the variable, each through SimGrid's own
 * System::update_modified_cnst_set (which skips one already marked, and walks from one it
 * marks), under the same conditions as SimGrid's: the selective update on, the variable enabled
 * (a sharing penalty above 0), and on some constraint.
 *
 * It reads three fields SimGrid does not export: the system's selective-update flag, the
 * variable's constraint elements (a std::vector<Element>) and its sharing penalty, at the
 * offsets of SimGrid 3.32 as Debian 12 builds it (the ones its own function reads). As the
 * library loads, it builds small systems of its own with SimGrid's exported functions, checks
 * every offset against what it put there, then enables the four flows above in one of them, one
 * after the other as their latencies would end, and checks that all four links are marked: a
 * libsimgrid laid out otherwise, or one whose calls to this function do not reach the stand-in
 * (a build that binds them within itself), stops the run before it starts, naming this check,
 * instead of giving a wrong answer.
 *
 * ORRERY_SMPI_LMM=simgrid keeps SimGrid's own function (the flows mis-shared as above). */
#include "mpi/smpi_next.hpp"

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#define EXPORTED __attribute__((visibility("default")))

#define FROM_VARIABLE "_ZN7simgrid6kernel3lmm6System38update_modified_cnst_set_from_variableEPKNS1_8VariableE"

// libsimgrid's own (exported) functions the stand-in and its check call, under the Itanium C++ ABI
// (a member function takes its object first)
void* lmm_build(std::string_view solver, bool selective) __asm__(
    "_ZN7simgrid6kernel3lmm6System5buildESt17basic_string_viewIcSt11char_traitsIcEEb");
void* lmm_constraint_new(void* system, void* resource, double bound) __asm__(
    "_ZN7simgrid6kernel3lmm6System14constraint_newEPNS0_8resource8ResourceEd");
void* lmm_variable_new(void* system, void* action, double penalty, double bound, size_t constraints) __asm__(
    "_ZN7simgrid6kernel3lmm6System12variable_newEPNS0_8resource6ActionEddm");
void lmm_expand(void* system, void* constraint, void* variable, double weight, bool force) __asm__(
    "_ZN7simgrid6kernel3lmm6System6expandEPNS1_10ConstraintEPNS1_8VariableEdb");
void lmm_update_modified_cnst_set(void* system, void* constraint) __asm__(
    "_ZN7simgrid6kernel3lmm6System24update_modified_cnst_setEPNS1_10ConstraintE");
void lmm_update_variable_penalty(void* system, void* variable, double penalty) __asm__(
    "_ZN7simgrid6kernel3lmm6System23update_variable_penaltyEPNS1_8VariableEd");
void lmm_clear_modified(void* system) __asm__("_ZN7simgrid6kernel3lmm6System28remove_all_modified_cnst_setEv");

namespace {

using orrery_smpi::Mode;

/* SimGrid 3.32's layout (src/kernel/lmm/System.hpp), as its own functions read it in Debian 12's
 * x86-64 build (check() checks it on any build): the system's selective_update_active; a
 * variable's cnsts_ (after two intrusive list hooks) and sharing_penalty_; an Element is three
 * hooks, then its constraint, its variable, two weights; a constraint's third hook links it into
 * the modified set (the check's only). */
constexpr size_t kSelective = 0x70;        // System: const bool selective_update_active
constexpr size_t kElements = 0x20;         // Variable: std::vector<Element> cnsts_ (begin, end, capacity)
constexpr size_t kPenalty = 0x38;          // Variable: double sharing_penalty_
constexpr size_t kElementSize = 0x50;      // sizeof(Element)
constexpr size_t kElementCnst = 0x30;      // Element: Constraint* constraint
constexpr size_t kElementVariable = 0x38;  // Element: Variable* variable
constexpr size_t kModifiedHook = 0x20;     // Constraint: modified_constraint_set_hook_ (next: null when unlinked)

template <typename T>
T field(const void* object, size_t offset) {
  T value;
  memcpy(&value, (const char*)object + offset, sizeof value);
  return value;
}

[[noreturn]] void layout_differs(const char* what) {
  fprintf(stderr,
          "orrery: libsimgrid's max-min system is not laid out as SimGrid 3.32's (%s): Orrery's fix of its "
          "selective update (interpose/mpi/smpi_lmm.cpp) needs SimGrid 3.32 as Debian 12 builds it\n",
          what);
  abort();
}

[[noreturn]] void left_out(const char* link) {
  fprintf(stderr,
          "orrery: libsimgrid's selective bandwidth update left %s out of the check's sharing (interpose/mpi/smpi_lmm.cpp): "
          "its calls do not reach Orrery's stand-in; Orrery needs SimGrid 3.32 as Debian 12 builds it\n",
          link);
  abort();
}

bool marked(const void* constraint) {
  return field<const void*>(constraint, kModifiedHook) != nullptr;
}

/* Every offset above, then the stand-in's effect, checked on systems built with SimGrid's
 * exported functions. First a variable of penalty 0.375 on two constraints, in a system with the
 * selective update and in one without. Then the four flows of the example above: s1 -> r1,
 * s1 -> r2, s2 -> r1, s2 -> r2, each on its sender's up-link and its receiver's down-link,
 * created disabled (as a transfer in its latency), the marks cleared (as a solve does), then
 * enabled one after the other (as latencies that end in one step): every link must be marked
 * (SimGrid's own marking leaves r2's down-link out). Nothing is solved: a solve reads the
 * variables' actions, which the check has none of. Its objects are kept for the process's life,
 * a few hundred bytes. */
void check() {
  void* plain = lmm_build("maxmin", false);
  void* selective = lmm_build("maxmin", true);
  if (field<bool>(plain, kSelective) || !field<bool>(selective, kSelective))
    layout_differs("System::selective_update_active");
  void* c1 = lmm_constraint_new(selective, nullptr, 1.0);
  void* c2 = lmm_constraint_new(selective, nullptr, 2.0);
  void* v = lmm_variable_new(selective, nullptr, 0.375, -1.0, 2);
  lmm_expand(selective, c1, v, 1.0, false);
  lmm_expand(selective, c2, v, 1.0, false);
  if (field<double>(v, kPenalty) != 0.375)
    layout_differs("Variable::sharing_penalty_");
  auto begin = field<const char*>(v, kElements), end = field<const char*>(v, kElements + sizeof(void*));
  if (end - begin != (ptrdiff_t)(2 * kElementSize))
    layout_differs("Variable::cnsts_, sizeof(Element)");
  for (int i = 0; i < 2; i++) {
    const char* e = begin + i * kElementSize;
    if (field<void*>(e, kElementCnst) != (i == 0 ? c1 : c2) || field<void*>(e, kElementVariable) != v)
      layout_differs("Element::constraint, Element::variable");
  }

  void* flows = lmm_build("maxmin", true);
  void* up[2] = {lmm_constraint_new(flows, nullptr, 1e12), lmm_constraint_new(flows, nullptr, 1e12)};
  void* down[2] = {lmm_constraint_new(flows, nullptr, 1e9), lmm_constraint_new(flows, nullptr, 1e9)};
  void* flow[4];
  for (int i = 0; i < 4; i++) {
    flow[i] = lmm_variable_new(flows, nullptr, 0.0, -1.0, 2);
    lmm_expand(flows, up[i / 2], flow[i], 1.0, false);
    lmm_expand(flows, down[i % 2], flow[i], 1.0, false);
  }
  if (!marked(up[0]) || !marked(down[1]))
    layout_differs("Constraint::modified_constraint_set_hook_");
  lmm_clear_modified(flows);
  for (void* c : {up[0], up[1], down[0], down[1]})
    if (marked(c))
      layout_differs("Constraint::modified_constraint_set_hook_");
  for (void* f : flow)
    lmm_update_variable_penalty(flows, f, 1.0);
  const char* names[4] = {"s1's up-link", "s2's up-link", "r1's down-link", "r2's down-link"};
  void* links[4] = {up[0], up[1], down[0], down[1]};
  for (int i = 0; i < 4; i++)
    if (!marked(links[i]))
      left_out(names[i]);
}

/* Whether SimGrid's own function runs (ORRERY_SMPI_LMM=simgrid); it has no report. */
bool simgrids_own() {
  Mode mode = orrery_smpi::mode_from_environment("ORRERY_SMPI_LMM");
  if (mode == Mode::Report) {
    fprintf(stderr, "orrery: environment variable ORRERY_SMPI_LMM: got 'report', expected 'simgrid' or unset\n");
    _exit(2);
  }
  return mode == Mode::Simgrid;
}

}  // namespace

// void simgrid::kernel::lmm::System::update_modified_cnst_set_from_variable(const Variable*)
EXPORTED void from_variable(void* system, const void* var) __asm__(FROM_VARIABLE);
void from_variable(void* system, const void* var) {
  using FromVariable = void (*)(void*, const void*);
  static const FromVariable simgrids = orrery_smpi::next<FromVariable>(FROM_VARIABLE);
  static const bool own = simgrids_own();
  if (own)
    return simgrids(system, var);
  if (!field<bool>(system, kSelective) || field<double>(var, kPenalty) <= 0)
    return;
  auto begin = field<const char*>(var, kElements), end = field<const char*>(var, kElements + sizeof(void*));
  if (begin == end)
    return;
  for (const char* e = begin; e < end; e += kElementSize)
    lmm_update_modified_cnst_set(system, field<void*>(e, kElementCnst));
}

/* The check, as smpimain loads this library (before SimGrid reads its configuration: the max-min
 * systems need none), unless SimGrid's own marking was asked for. */
__attribute__((constructor)) static void check_as_loaded() {
  if (!simgrids_own())
    check();
}
