// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

/// @title Emitter: rflow's test contract.
/// @notice Emits Deposit logs singly and in bulk (chain trigger tests and
/// benchmarks), a Claimed log, a view for read triggers, and a function that
/// reverts with a reason (relayer tests).
contract Emitter {
    event Deposit(address indexed sender, uint256 amount);
    event Claimed(address indexed user, uint256 amount);

    uint256 public assets;

    /// @notice refund reverts with this reason when amount exceeds the limit.
    uint256 public constant REFUND_LIMIT = 1000;

    function deposit(uint256 amount) external payable {
        assets += amount;
        emit Deposit(msg.sender, amount);
    }

    /// @notice emitMany emits n Deposit logs with amounts start, start+1, ...
    function emitMany(uint256 n, uint256 start) external {
        for (uint256 i = 0; i < n; i++) {
            emit Deposit(msg.sender, start + i);
        }
        assets += n;
    }

    function claim(uint256 amount) external {
        emit Claimed(msg.sender, amount);
    }

    function totalAssets() external view returns (uint256) {
        return assets;
    }

    function refund(address to, uint256 amount) external {
        require(amount <= REFUND_LIMIT, "insufficient assets");
        emit Claimed(to, amount);
    }
}
