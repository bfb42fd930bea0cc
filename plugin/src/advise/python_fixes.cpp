// The fixes of a Python training loop's findings, in Python (issue 16: a Python report suggested
// LibTorch code). The rules write the C++ fix; a Python loop (Environment::language) gets the
// same advice through the torch and fathom Python APIs here, by finding id. A fix that is only
// comments gets Python's comment mark; shell lines (nvidia-smi, lspci) stay as they are.
#include <optional>
#include <string>
#include <string_view>

#include "advise/advisor_rules.h"

namespace fathom::advice {
namespace {

constexpr std::string_view kDataLoader =
    "# load the next batch while this step computes; with a torch.utils.data.DataLoader:\n"
    "loader = torch.utils.data.DataLoader(dataset, batch_size=bs, num_workers=8,\n"
    "                                     prefetch_factor=4, pin_memory=True,\n"
    "                                     persistent_workers=True)\n"
    "# batches your own code makes: make the next one ahead, on a thread or process pool\n"
    "next_batch = pool.submit(make_batch, i + 1)  # concurrent.futures; .result() next step";

constexpr std::string_view kPinned =
    "# pinned host memory: the loader pins each batch, the copy does not block\n"
    "loader = torch.utils.data.DataLoader(dataset, batch_size=bs, num_workers=4, pin_memory=True)\n"
    "x = step.to_device(x, device, non_blocking=True)  # per batch";

constexpr std::string_view kAsyncCopy =
    "# copy the next batch while this one computes (prefetch), from pinned memory\n"
    "x = step.to_device(x.pin_memory(), device, non_blocking=True)";

constexpr std::string_view kBelowLinkPeak =
    "x = step.to_device(x.pin_memory(), device, non_blocking=True)\n"
    "# then check the link under load, and prefer NVLink for GPU-to-GPU traffic:\n"
    "#   nvidia-smi -q -d PCI | grep -A3 -E 'Link (Gen|Width)';  nvidia-smi nvlink -s";

constexpr std::string_view kSideStream =
    "# prefetch: copy batch i+1 on a side stream while batch i computes\n"
    "side = torch.cuda.Stream()\n"
    "with torch.cuda.stream(side):\n"
    "    next_x = step.to_device(next_x.pin_memory(), device, non_blocking=True)\n"
    "torch.cuda.current_stream().wait_stream(side)  # before using next_x";

constexpr std::string_view kHostSync =
    "# keep running values on the device; read them once per epoch, not per step\n"
    "running_loss += loss.detach()         # instead of loss.item()\n"
    "...\n"
    "print(running_loss.item() / steps)    # at epoch end";

constexpr std::string_view kLaunchBound =
    "# fewer launches: compile the step, which captures it as CUDA graphs\n"
    "model = torch.compile(model, mode=\"reduce-overhead\")\n"
    "# or a larger batch: the same launches do more work each";

constexpr std::string_view kCommunication =
    "# DistributedDataParallel starts each bucket's all-reduce during backward; larger buckets:\n"
    "model = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=100)\n"
    "# and all-reduce every k steps with gradient accumulation:\n"
    "for micro in range(k):\n"
    "    with model.no_sync() if micro < k - 1 else contextlib.nullcontext():\n"
    "        criterion(model(xs[micro]), ys[micro]).backward()\n"
    "optimizer.step()";

constexpr std::string_view kMixedPrecision =
    "# let fathom enable it after a warm-up, watch the loss and roll back if it drifts:\n"
    "session = fathom.Session(mode=\"auto\")\n"
    "session.configure_amp(when=\"mode\", dtype=\"bf16\")\n"
    "with step.forward():\n"
    "    loss = criterion(model(x), y)   # autocast here\n"
    "step.loss(loss)\n"
    "# or by hand (fp16 also needs torch.amp.GradScaler):\n"
    "with torch.autocast(device_type=\"cuda\", dtype=torch.bfloat16):\n"
    "    loss = criterion(model(x), y)\n"
    "torch.backends.cuda.matmul.allow_tf32 = True  # TF32 for what stays fp32";

constexpr std::string_view kMixedPrecisionFromStart =
    "# to run it from the first step, without the warm-up:\n"
    "session.configure_amp(when=\"always\")";

constexpr std::string_view kRolledBack =
    "# keep fp32; or allow more drift, or force it on and inspect the loss yourself:\n"
    "session.configure_amp(tolerance=0.2)\n"
    "session.configure_amp(when=\"always\")";

constexpr std::string_view kMemory =
    "# checkpoint activations (recompute them in backward) and use mixed precision:\n"
    "out = torch.utils.checkpoint.checkpoint_sequential(model, segments, x, use_reentrant=False)\n"
    "with torch.autocast(device_type=\"cuda\", dtype=torch.bfloat16): ...\n"
    "# or halve the batch and accumulate gradients to keep the effective batch size:\n"
    "optimizer.zero_grad()\n"
    "for x_half, y_half in zip(x.chunk(2), y.chunk(2)):\n"
    "    (criterion(model(x_half), y_half) / 2).backward()\n"
    "optimizer.step()";

constexpr std::string_view kCheckpoint =
    "# recompute the chain's activations in backward instead of keeping them:\n"
    "out = torch.utils.checkpoint.checkpoint_sequential(model, segments, x, use_reentrant=False)";

// What the plan's per-module lines say, in PyTorch's own terms: selective checkpointing keeps the
// expensive ops' outputs and recomputes the rest; save_on_cpu offloads a module's saved tensors.
constexpr std::string_view kActivationPlan =
    "from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts, "
    "CheckpointPolicy\n"
    "def policy(ctx, op, *args, **kwargs):  # keep what the plan keeps, recompute the rest\n"
    "    return CheckpointPolicy.MUST_SAVE if op in keep_ops else "
    "CheckpointPolicy.PREFER_RECOMPUTE\n"
    "out = checkpoint(block, x, use_reentrant=False,\n"
    "                 context_fn=lambda: create_selective_checkpoint_contexts(policy))\n"
    "# the modules it offloads:\n"
    "with torch.autograd.graph.save_on_cpu(pin_memory=True):\n"
    "    out = block(x)";

constexpr std::string_view kBatchHeadroom =
    "# twice the batch; scale the learning rate with it (linear scaling rule)\n"
    "loader = torch.utils.data.DataLoader(dataset, batch_size=2 * bs)\n"
    "optimizer = torch.optim.AdamW(model.parameters(), lr=2 * lr)";

constexpr std::string_view kScopes =
    "with step.forward():\n"
    "    ...\n"
    "with step.backward():\n"
    "    ...";

constexpr std::string_view kMemoryCreep =
    "running_loss += loss.detach()    # or loss.item(), not loss itself\n"
    "history.append(out.detach())     # keep values, not graphs";

// "// x" -> "# x" on every line; nullopt when a line is code, not a comment.
std::optional<std::string> comments_in_python(const std::string& fix) {
  std::string out;
  std::size_t start = 0;
  while (start < fix.size()) {
    std::size_t nl = fix.find('\n', start);
    if (nl == std::string::npos) nl = fix.size();
    std::string_view line(fix.data() + start, nl - start);
    if (line.substr(0, 2) == "//")
      out.append("#").append(line.substr(2));
    else if (line.substr(0, 1) == "#" || line.empty())
      out += std::string(line);
    else
      return std::nullopt;
    if (nl < fix.size()) out += '\n';
    start = nl + 1;
  }
  return out;
}

std::string_view python_fix(const Finding& f) {
  const std::string_view id = f.id;
  if (id == finding_id::kDataLoaderBound) return kDataLoader;
  if (id == finding_id::kCopyPageable) return kPinned;
  if (id == finding_id::kCopySynchronous) return kAsyncCopy;
  if (id == finding_id::kTransferBelowLinkPeak) return kBelowLinkPeak;
  if (id == finding_id::kTransferExposed) return kSideStream;
  if (id == finding_id::kHostSync) return kHostSync;
  if (id == finding_id::kLaunchBound) return kLaunchBound;
  if (id == finding_id::kCommunication) return kCommunication;
  if (id == finding_id::kMixedPrecision)
    return f.applied ? kMixedPrecisionFromStart : kMixedPrecision;
  if (id == finding_id::kMixedPrecisionRolledBack) return kRolledBack;
  if (id == finding_id::kMemoryNearCapacity || id == finding_id::kHardwareFit) return kMemory;
  if (id == finding_id::kActivationCheckpointing) return kCheckpoint;
  if (id == finding_id::kBatchHeadroom) return kBatchHeadroom;
  if (id == finding_id::kScopesUnaccounted) return kScopes;
  if (id == finding_id::kMemoryCreep) return kMemoryCreep;
  return {};
}

// The plan's comment lines (its predicted memory and time, module by module), then the code.
std::string activation_plan_in_python(const std::string& fix) {
  std::string out;
  std::size_t start = 0;
  while (start < fix.size()) {
    std::size_t nl = fix.find('\n', start);
    if (nl == std::string::npos) nl = fix.size();
    const std::string_view line(fix.data() + start, nl - start);
    if (line.substr(0, 2) == "//" && line.find("FATHOM_MODE") == std::string_view::npos) {
      out += '#';
      out.append(line.substr(2));
      out += '\n';
    }
    start = nl + 1;
  }
  return out + std::string(kActivationPlan);
}

}  // namespace

void write_fixes_in_python(std::vector<Finding>& findings) {
  for (Finding& f : findings) {
    if (f.fix.empty()) continue;  // nothing to do (mixed precision forced on from the start)
    if (f.id == finding_id::kActivationPlan) {
      f.fix = activation_plan_in_python(f.fix);
      continue;
    }
    if (const std::string_view py = python_fix(f); !py.empty()) {
      f.fix = std::string(py);
    } else if (auto comments = comments_in_python(f.fix)) {
      f.fix = std::move(*comments);
    }
    // Else shell commands (nvidia-smi, lspci): the same in either language.
  }
}

}  // namespace fathom::advice
