# -*- coding: utf-8 -*-
# Copyright: accel.nodes contributors
# Apache License 2.0 (see LICENSE)
"""What runs where: every role's per-OS data, rendered for every OS the role claims.

Each role claims its platforms in meta/main.yml. For each claimed OS this test loads
the role's vars files the way its tasks do (defaults/main.yml, vars/main.yml, then the
per-OS files), templates the package names and repository URLs with Ansible's own
Templar, and checks them against the vendors' published tables, cited at each table.

Only Debian 12 runs in Molecule; the other rows are checked here and nowhere else.
"""

from __future__ import annotations

import glob
import os
import re

import pytest
import yaml

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

try:  # ansible-core >= 2.19 templates only strings marked as trusted
    from ansible.template import trust_as_template
except ImportError:  # ansible-core 2.18 trusts every string
    def trust_as_template(value):
        return value

ROLES = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'roles')
ALL_ROLES = sorted(os.path.basename(os.path.dirname(os.path.dirname(p)))
                   for p in glob.glob(os.path.join(ROLES, '*', 'meta', 'main.yml')))

# Galaxy platform names and versions, as the roles' meta/main.yml spell them, to the
# facts Ansible gathers on such a host. EL stands for RHEL and its rebuilds.
PLATFORM_HOSTS = {
    ('Ubuntu', 'focal'): [('Ubuntu', '20.04', 'Debian', 'focal')],
    ('Ubuntu', 'jammy'): [('Ubuntu', '22.04', 'Debian', 'jammy')],
    ('Ubuntu', 'noble'): [('Ubuntu', '24.04', 'Debian', 'noble')],
    ('Debian', 'bookworm'): [('Debian', '12.8', 'Debian', 'bookworm')],
    ('Amazon Linux', '2023'): [('Amazon', '2023', 'RedHat', '')],
    ('EL', '9'): [('RedHat', '9.4', 'RedHat', 'Plow'), ('Rocky', '9.4', 'RedHat', 'Blue Onyx'),
                  ('AlmaLinux', '9.4', 'RedHat', 'Seafoam Ocelot')],
}

# The only OS the Molecule scenarios run (their node image is Debian 12).
RUN_IN_MOLECULE = {('Debian', '12')}


def _trusted(data):
    if isinstance(data, str):
        return trust_as_template(data)
    if isinstance(data, dict):
        return {k: _trusted(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_trusted(v) for v in data]
    return data


def _load(role, *parts):
    path = os.path.join(ROLES, role, *parts)
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return _trusted(yaml.safe_load(f) or {})


def host(distribution, version, os_family, release='', architecture='x86_64', kernel='6.8.0-1024-aws'):
    return {
        'distribution': distribution,
        'distribution_version': version,
        'distribution_major_version': version.split('.')[0],
        'distribution_release': release,
        'os_family': os_family,
        'architecture': architecture,
        'kernel': kernel,
    }


def claimed_hosts(role):
    """The hosts a role claims in meta/main.yml, as fact dicts."""
    meta = _load(role, 'meta', 'main.yml')
    hosts = []
    for platform in meta['galaxy_info']['platforms']:
        for version in platform['versions']:
            key = (platform['name'], str(version))
            assert key in PLATFORM_HOSTS, '%s claims %r, which this test does not know' % (role, key)
            hosts.extend(host(*h) for h in PLATFORM_HOSTS[key])
    return hosts


def _first(role, names):
    for name in names:
        if os.path.exists(os.path.join(ROLES, role, 'vars', name)):
            return name
    return None


def vars_files(role, facts):
    """The per-OS vars files the role's tasks load for these facts, in order."""
    d, major, family = facts['distribution'], facts['distribution_major_version'], facts['os_family']
    if role == 'nvidia_driver':  # tasks/main.yml: <family>.yml, then the first of <Dist>-<major>, <family>-<major>
        second = _first(role, ['%s-%s.yml' % (d, major), '%s-%s.yml' % (family, major)])
        return ['%s.yml' % family, second] if second else None
    if role == 'neuron_driver':  # tasks/variables.yml: <family>.yml, then <Dist>-<major>.yml if there is one
        return ['%s.yml' % family] + [n for n in ['%s-%s.yml' % (d, major)] if _first(role, [n])]
    if role in ('docker', 'nvidia_container_toolkit'):  # first_found <Dist>-<major>, <Dist>, <family>
        found = _first(role, ['%s-%s.yml' % (d, major), '%s.yml' % d, '%s.yml' % family])
        return [found] if found else None
    if role == 'neuron_container_runtime':  # tasks/variables.yml: <family>.yml
        return ['%s.yml' % family]
    return []  # oci_add_hooks, accelerator_validation: vars/main.yml only


def render(role, facts, **extra):
    variables = {}
    variables.update(_load(role, 'defaults', 'main.yml'))
    variables.update(_load(role, 'vars', 'main.yml'))
    files = vars_files(role, facts)
    assert files is not None, '%s has no vars for %r' % (role, facts)
    for name in files:
        variables.update(_load(role, 'vars', name))
    variables['ansible_facts'] = facts
    variables['ansible_check_mode'] = False
    variables.update(_trusted(extra))
    return Templar(loader=DataLoader(), variables=variables)


def value(templar, expr):
    return templar.template(trust_as_template('{{ %s }}' % expr))


def _ids(hosts):
    return ['%s-%s' % (h['distribution'], h['distribution_version']) for h in hosts]


def _cases(role):
    hosts = claimed_hosts(role)
    return pytest.mark.parametrize('facts', hosts, ids=_ids(hosts))


# What the roles claim.

@pytest.mark.parametrize('role', ALL_ROLES)
def test_no_role_claims_el8(role):
    """ansible-core 2.17 and later cannot manage EL8's platform Python (3.6, the only
    one with dnf bindings), and meta/runtime.yml requires ansible-core 2.18."""
    meta = _load(role, 'meta', 'main.yml')
    for platform in meta['galaxy_info']['platforms']:
        if platform['name'] == 'EL':
            assert '8' not in [str(v) for v in platform['versions']], role
    assert not os.path.exists(os.path.join(ROLES, role, 'vars', 'RedHat-8.yml'))


@pytest.mark.parametrize('role', ALL_ROLES)
def test_every_claimed_os_has_its_vars(role):
    for facts in claimed_hosts(role):
        assert vars_files(role, facts) is not None, (role, facts)


def test_support_table():
    """Every OS some role claims, and how it was checked."""
    claimed = sorted({(h['distribution'], h['distribution_major_version']) for r in ALL_ROLES for h in claimed_hosts(r)})
    assert claimed == [('AlmaLinux', '9'), ('Amazon', '2023'), ('Debian', '12'), ('RedHat', '9'), ('Rocky', '9'),
                       ('Ubuntu', '20'), ('Ubuntu', '22'), ('Ubuntu', '24')]
    assert RUN_IN_MOLECULE <= set(claimed)


def test_nvidia_driver_branch_comment_names_the_branch_designations():
    """NVIDIA's support matrix (docs.nvidia.com/datacenter/tesla/drivers/615/
    supported-drivers-and-cuda-toolkit-versions.html): R580 is a Long Term Support
    Branch, R595 the Production Branch."""
    with open(os.path.join(ROLES, 'nvidia_driver', 'defaults', 'main.yml')) as f:
        text = f.read()
    comment = text.split('nvidia_driver_branch:')[0].rsplit('\n\n', 1)[-1]
    assert re.search(r'580 is NVIDIA.s Long Term Support branch', comment)
    assert re.search(r'Production Branch is 595', comment)
    assert 'current production branch' not in comment
    assert _load('nvidia_driver', 'defaults', 'main.yml')['nvidia_driver_branch'] == '580'
