#!/bin/sh
# TEST DOUBLE of oci_neuron_hook_wrapper.sh (aws-neuronx-oci-hook 2.19.65.0). Not the real tool.
# Like the vendor wrapper quoted in aws-neuron-sdk issue #911, it looks both
# tools up on PATH when a container starts; when oci-add-hooks is missing,
# `exec` gets an empty program name and every container fails. The role
# accel.nodes.neuron_container_runtime replaces this file with a wrapper that
# names both tools by absolute path.
HOOK_CONFIG=/opt/aws/neuron/share/oci_neuron_hook_config.json
RUNC=$(which runc)
OCI_ADD_HOOKS=$(which oci-add-hooks)
exec "$OCI_ADD_HOOKS" --hook-config-path "$HOOK_CONFIG" --runtime-path "$RUNC" "$@"
