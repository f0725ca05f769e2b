"""The VM reference (docs/vm-reference.md): job files run on real kernel
code in QEMU beside the emulator. prepare.sh caches the VM; machine.py boots
it; translate.py turns a job and its stack into null_blk + md in the guest;
guest_trace.py turns the guest's tracefs text into blktrace files; diff.py
compares both sides; reference.py is `harness reference --vm`."""
