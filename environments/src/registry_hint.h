// The message a failed RUN gets when it installs from a language package registry: the
// build sandbox reaches only this machine's apt mirrors.
#pragma once

#include <string>

namespace flotilla::environments {

// "" when `command` installs nothing from pip, npm, yarn, pnpm, gem, cargo or go.
std::string RegistryHint(const std::string& command);

}  // namespace flotilla::environments
