#pragma once
// Everything a LibTorch training loop needs from fathom.
#include <fathom/amp.h>
#include <fathom/autocast.h>
#include <fathom/block.h>
#include <fathom/checkpoint.h>
#include <fathom/distributed.h>
#include <fathom/fathom_core.h>
#include <fathom/grad_scaler.h>
#include <fathom/guarded_step.h>
#include <fathom/module_forms.h>
#include <fathom/module_forward.h>
#include <fathom/offload.h>
#include <fathom/sequential.h>
#include <fathom/session.h>
