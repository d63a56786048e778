//===- Backends.cpp - Loading libgradc-backends.so ------------------------===//
//
// Finds and loads the plugin of Backends.h once per process. It is looked
// for, in order: where GRADC_BACKENDS names it; beside the executable (the
// build tree); at GRADC_BACKENDS_INSTALL_DIR relative to the executable's
// directory (an installed gradc).
//
//===----------------------------------------------------------------------===//

#include "Backends.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cstdlib>
#include <dlfcn.h>

using namespace gradc;
using namespace gradc::driver;

static constexpr const char *pluginFile = "libgradc-backends.so";

/// The candidate paths of the plugin, in the order they are tried.
static std::vector<std::string> candidatePaths() {
  if (const char *path = std::getenv("GRADC_BACKENDS"))
    return {path};
  std::string exe = llvm::sys::fs::getMainExecutable(
      nullptr, reinterpret_cast<void *>(&candidatePaths));
  llvm::StringRef dir = llvm::sys::path::parent_path(exe);
  llvm::SmallString<256> besides(dir), installed(dir);
  llvm::sys::path::append(besides, pluginFile);
  llvm::sys::path::append(installed, GRADC_BACKENDS_INSTALL_DIR, pluginFile);
  return {std::string(besides), std::string(installed)};
}

std::string driver::findBackendPlugin() {
  for (const std::string &path : candidatePaths())
    if (llvm::sys::fs::exists(path))
      return path;
  return "";
}

static const BackendPlugin *load(std::string &error) {
  std::vector<std::string> paths = candidatePaths();
  std::string tried;
  for (const std::string &path : paths) {
    if (paths.size() > 1 && !llvm::sys::fs::exists(path)) {
      tried += (tried.empty() ? "'" : ", '") + path + "'";
      continue;
    }
    // RTLD_LOCAL: libLLVM's symbols stay out of the global scope, where
    // the executable's copy of LLVMSupport would not see them anyway.
    void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char *why = dlerror();
      error = why ? why : ("cannot load '" + path + "'");
      return nullptr;
    }
    auto entry = reinterpret_cast<const BackendPlugin *(*)()>(
        dlsym(handle, backendPluginEntry));
    if (!entry) {
      error = "'" + path + "' has no " + backendPluginEntry;
      return nullptr;
    }
    const BackendPlugin *plugin = entry();
    if (plugin->version != backendPluginVersion) {
      error = "'" + path + "' is version " + std::to_string(plugin->version) +
              ", this gradc needs version " +
              std::to_string(backendPluginVersion);
      return nullptr;
    }
    return plugin;
  }
  error = std::string(pluginFile) + " not found (looked for " + tried +
          "; GRADC_BACKENDS may name it)";
  return nullptr;
}

static std::vector<std::string> &llvmArgs() {
  static std::vector<std::string> args;
  return args;
}

void driver::setLLVMArgs(std::vector<std::string> args) {
  llvmArgs() = std::move(args);
}

/// The plugin, loaded once and given the `-mllvm` arguments; null with
/// `why` set if it could not be.
static const BackendPlugin *loadOnce(std::string &why) {
  static std::string loadError;
  static const BackendPlugin *plugin = [] {
    const BackendPlugin *p = load(loadError);
    if (p && !llvmArgs().empty() && !p->parseLLVMOptions(llvmArgs(), loadError))
      p = nullptr;
    return p;
  }();
  if (!plugin)
    why = loadError;
  return plugin;
}

const BackendPlugin *driver::getBackendPlugin(std::string &error) {
  std::string why;
  const BackendPlugin *plugin = loadOnce(why);
  if (!plugin)
    error = "cannot load gradc's LLVM and Clang backends: " + why;
  return plugin;
}

const BackendPlugin *driver::getBackendPlugin(DiagnosticEngine &diags) {
  std::string why;
  const BackendPlugin *plugin = loadOnce(why);
  if (!plugin)
    diags.report(SourceLoc(), diag::err_backend_plugin) << why;
  return plugin;
}
