#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
module: node_state
short_description: Record what a successful run left on a node, and tell whether it is still so
version_added: 0.1.0
description:
  - Keeps a state record, a small JSON file, of what a successful C(accel.nodes.site) run left on the node.
    With O(state=compared) it says whether the node still matches that record; C(accel.nodes.site) then
    skips the provisioning roles on the nodes that match.
  - The record holds fingerprints, not copies, of
    the O(inputs) digest that the caller computes from everything that decides the wanted state
    (variables, the collection's own files, the hardware);
    the running kernel and its command line (which decides, for one, cgroup v1 or v2); C(/etc/os-release);
    the installed packages (the whole dpkg status file, or the sorted output of C(rpm -qa), so any package
    change anywhere counts);
    the content, type, mode and owner of each file under O(paths), recursively; and the
    C(ActiveState) and C(UnitFileState) of each systemd unit in O(services).
  - Any difference at all is drift. The record errs on the side of a full run, never the other way.
  - Comparing reads the paths and services named in the record itself, so it needs only O(inputs).
author:
  - accel.nodes maintainers (@accel-nodes)
extends_documentation_fragment:
  - accel.nodes.attributes
attributes:
  check_mode:
    support: full
    details:
      - O(state=compared) only reads, and runs in check mode as in a normal run.
      - O(state=recorded) and O(state=absent) report the change they would make and write nothing.
  diff_mode:
    support: full
options:
  state:
    description:
      - V(compared) compares the node with the record and changes nothing; RV(converged) and RV(drift) give the answer.
      - V(recorded) writes the record of the node as it is now. A record that would only differ in its
        timestamp is not rewritten.
      - V(absent) removes the record, so that the next comparison finds drift.
    type: str
    choices: [compared, recorded, absent]
    default: compared
  path:
    description:
      - The record file.
    type: path
    default: /var/lib/accel-nodes/state.json
  inputs:
    description:
      - A digest of everything that decides what the node should look like, computed by the caller.
      - Required with O(state=compared) and O(state=recorded).
    type: str
  paths:
    description:
      - Files and directories to fingerprint, with O(state=recorded). Directories are walked recursively,
        symbolic links are not followed. A path that does not exist is recorded as absent.
      - When not given, those of the existing record, if any.
    type: list
    elements: path
  services:
    description:
      - systemd units whose C(ActiveState) and C(UnitFileState) to record, with O(state=recorded).
        On a host where C(systemctl) cannot answer, every unit is recorded as C(unknown).
      - When not given, those of the existing record, if any.
    type: list
    elements: str
  validated:
    description:
      - With O(state=recorded), whether the node passed validation in this run. Returned as RV(validated)
        by a later comparison.
    type: bool
    default: false
notes:
  - The record is written atomically with mode C(0600), and its directory is created with mode C(0755).
seealso:
  - module: accel.nodes.accelerator_facts
"""

EXAMPLES = r"""
- name: Compare the node with its state record
  accel.nodes.node_state:
    inputs: "{{ accel_nodes_inputs }}"
  register: accel_nodes_state

- name: Record the node's state after a run that passed validation
  accel.nodes.node_state:
    state: recorded
    inputs: "{{ accel_nodes_inputs }}"
    paths: [/etc/docker, /etc/containerd, /etc/apt/sources.list.d, /etc/modprobe.d]
    services: [docker.service, containerd.service]
    validated: true

- name: Forget the record after a failed validation
  accel.nodes.node_state:
    state: absent
"""

RETURN = r"""
path:
  description: The record file.
  returned: always
  type: str
  sample: /var/lib/accel-nodes/state.json
converged:
  description: Whether the node matches its record, with O(state=compared).
  returned: always
  type: bool
  sample: true
drift:
  description:
    - What differs from the record, one line each, with O(state=compared). Empty when RV(converged).
  returned: always
  type: list
  elements: str
  sample: ["inputs changed (variables, collection files or hardware)", "/etc/docker changed", "docker.service: active/enabled, was inactive/enabled"]
validated:
  description: Whether the recorded run passed validation; false without a record.
  returned: always
  type: bool
  sample: true
recorded_at:
  description: When the record was written (UTC), or null without a record.
  returned: always
  type: str
  sample: "2026-11-21T04:31:07Z"
"""

import hashlib
import json
import os
import stat
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.accel.nodes.plugins.module_utils import _files

SCHEMA_VERSION = 1
OS_RELEASE = '/etc/os-release'
KERNEL_CMDLINE = '/proc/cmdline'
DPKG_STATUS = '/var/lib/dpkg/status'
RECORD_MODE = 0o600


def _sha256(data):
    return hashlib.sha256(data).hexdigest()


def _file_sha256(path):
    digest = hashlib.sha256()
    with open(path, 'rb') as handle:
        for block in iter(lambda: handle.read(1 << 20), b''):
            digest.update(block)
    return digest.hexdigest()


def _entry(path):
    """One line describing path: its type, mode, owner, and content digest or link target."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return 'absent'
    head = '%o %d:%d' % (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid)
    if stat.S_ISLNK(st.st_mode):
        return 'link %s -> %s' % (head, os.readlink(path))
    if stat.S_ISREG(st.st_mode):
        try:
            return 'file %s %s' % (head, _file_sha256(path))
        except OSError as exc:  # unreadable is a state too: it counts as drift when it changes
            return 'file %s unreadable (%s)' % (head, exc.strerror)
    if stat.S_ISDIR(st.st_mode):
        return 'dir %s' % head
    return 'other %s %o' % (head, stat.S_IFMT(st.st_mode))


def path_fingerprint(path):
    """A digest of path and, for a directory, of everything under it."""
    lines = [_entry(path)]
    if lines[0].startswith('dir '):
        for top, dirs, files in os.walk(path):
            dirs.sort()
            for name in sorted(dirs + files):
                full = os.path.join(top, name)
                lines.append('%s %s' % (os.path.relpath(full, path), _entry(full)))
    return _sha256('\n'.join(lines).encode('utf-8'))


def packages_fingerprint(module):
    """A digest of every installed package and its version (and, for dpkg, its selection such as hold)."""
    if os.path.exists(DPKG_STATUS):
        return 'dpkg ' + _file_sha256(DPKG_STATUS)
    rpm = module.get_bin_path('rpm')
    if rpm:
        rc, out, err = module.run_command([rpm, '-qa', '--qf', '%{NAME}-%{EPOCHNUM}:%{VERSION}-%{RELEASE}.%{ARCH}\\n'])
        if rc != 0:
            module.fail_json(msg='rpm -qa failed (rc %d): %s. Repair the RPM database (rpm --rebuilddb), '
                                 'or run with accel_nodes_skip_unchanged=false.' % (rc, err.strip()))
        return 'rpm ' + _sha256('\n'.join(sorted(out.splitlines())).encode('utf-8'))
    return 'none'


def services_state(module, units):
    """{unit: 'ActiveState/UnitFileState'}, 'unknown' for each unit where systemctl cannot answer."""
    systemctl = module.get_bin_path('systemctl')
    if not units:
        return {}
    if systemctl:
        rc, out, dummy = module.run_command([systemctl, 'show', '--property=ActiveState,UnitFileState', '--'] + units,
                                            environ_update={'LC_ALL': 'C', 'SYSTEMD_PAGER': ''})
        blocks = out.strip().split('\n\n') if rc == 0 else []
        if len(blocks) == len(units):
            states = {}
            for unit, block in zip(units, blocks):
                props = dict(line.split('=', 1) for line in block.splitlines() if '=' in line)
                states[unit] = '%s/%s' % (props.get('ActiveState') or '-', props.get('UnitFileState') or '-')
            return states
    return dict((unit, 'unknown') for unit in units)


def _file_or_absent(path):
    try:
        return _file_sha256(path)
    except OSError:
        return 'absent'


def fingerprints(module, paths, services):
    return {
        'kernel': os.uname()[2],
        'kernel_cmdline': _file_or_absent(KERNEL_CMDLINE),
        'os_release': _file_or_absent(OS_RELEASE),
        'packages': packages_fingerprint(module),
        'paths': dict((path, path_fingerprint(path)) for path in paths),
        'services': services_state(module, services),
    }


def drift(record, inputs, now):
    """What differs between the record and now, one line each."""
    found = []
    if record.get('inputs') != inputs:
        found.append('inputs changed (variables, collection files or hardware)')
    was = record['fingerprints']
    if was['kernel'] != now['kernel']:
        found.append('kernel %s, was %s' % (now['kernel'], was['kernel']))
    if was['kernel_cmdline'] != now['kernel_cmdline']:
        found.append('the kernel command line changed')
    if was['os_release'] != now['os_release']:
        found.append('%s changed' % OS_RELEASE)
    if was['packages'] != now['packages']:
        found.append('installed packages changed')
    found.extend('%s changed' % path for path in was['paths'] if was['paths'][path] != now['paths'][path])
    found.extend('%s: %s, was %s' % (unit, now['services'][unit], was['services'][unit])
                 for unit in was['services'] if was['services'][unit] != now['services'][unit])
    return found


def read_record(text, path):
    """The record in text, or (None, why) when there is no usable record."""
    if text is None:
        return None, 'no state record at %s' % path
    try:
        record = json.loads(text)
        if record.get('schema_version') != SCHEMA_VERSION:
            return None, 'the state record at %s has schema %r, not %d' % (path, record.get('schema_version'), SCHEMA_VERSION)
        fp = record['fingerprints']
        if not (isinstance(fp['paths'], dict) and isinstance(fp['services'], dict)
                and all(key in fp for key in ('kernel', 'kernel_cmdline', 'os_release', 'packages'))):
            raise KeyError('fingerprints')
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return None, 'the state record at %s is damaged (%s): it is written again after the next full run' % (path, exc)
    return record, None


def recorded(record, key):
    """The paths or the services named in record, or none without one."""
    return list(record['fingerprints'][key]) if record else []


def render(record):
    return json.dumps(record, indent=2, sort_keys=True) + '\n'


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type='str', default='compared', choices=['compared', 'recorded', 'absent']),
            path=dict(type='path', default='/var/lib/accel-nodes/state.json'),
            inputs=dict(type='str'),
            paths=dict(type='list', elements='path'),
            services=dict(type='list', elements='str'),
            validated=dict(type='bool', default=False),
        ),
        required_if=[('state', 'compared', ['inputs']), ('state', 'recorded', ['inputs'])],
        supports_check_mode=True,
    )
    p = module.params
    path = p['path']
    try:
        before = _files.read_text(path)
        old, why = read_record(before, path)
    except ValueError as exc:  # not UTF-8: damaged, like any other unreadable record
        before, old = '(not UTF-8)', None
        why = 'the state record at %s is damaged (%s): it is written again after the next full run' % (path, exc)
    except OSError as exc:
        module.fail_json(msg='Cannot read the state record: %s' % exc, path=path)
    result = dict(changed=False, path=path, converged=False, drift=[],
                  validated=bool(old and old.get('validated')), recorded_at=old.get('written') if old else None)

    if p['state'] == 'compared':
        if old is None:
            result['drift'] = [why]
        else:
            now = fingerprints(module, recorded(old, 'paths'), recorded(old, 'services'))
            result['drift'] = drift(old, p['inputs'], now)
            result['converged'] = not result['drift']
        module.exit_json(**result)

    if p['state'] == 'absent':
        after = None
        result.update(validated=False, recorded_at=None)
    else:
        record = {
            'schema_version': SCHEMA_VERSION,
            'inputs': p['inputs'],
            'validated': p['validated'],
            'fingerprints': fingerprints(module, *[recorded(old, key) if p[key] is None else p[key] for key in ('paths', 'services')]),
        }
        unchanged = old is not None and dict(old, written=None) == dict(record, written=None)
        record['written'] = old['written'] if unchanged else time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())
        after = render(record)
        result.update(validated=p['validated'], recorded_at=record['written'])
    update = _files.update_file(module, path, before, after, mode=RECORD_MODE)
    result['changed'] = update['changed']
    if module._diff:
        result['diff'] = update['diff']
    module.exit_json(**result)


if __name__ == '__main__':
    main()
