#!/bin/sh
# TEST DOUBLE of the Neuron driver build. Not the real one: writes a placeholder
# text file instead of compiling anything.
set -e
printf 'TEST DOUBLE of neuron.ko (aws-neuronx 2.31.7.0) for kernel %s. Not a kernel module.\n' "$1" >neuron.ko
