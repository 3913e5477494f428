// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

/// @title Token: the smallest ERC-20 the oz-monitor import test needs.
/// @notice The deployer holds the whole supply; transfer emits the standard
/// Transfer(address indexed from, address indexed to, uint256 value).
contract Token {
    event Transfer(address indexed from, address indexed to, uint256 value);

    mapping(address => uint256) public balanceOf;

    constructor() {
        balanceOf[msg.sender] = 1e24;
        emit Transfer(address(0), msg.sender, 1e24);
    }

    function transfer(address to, uint256 value) external returns (bool) {
        require(balanceOf[msg.sender] >= value, "balance");
        balanceOf[msg.sender] -= value;
        balanceOf[to] += value;
        emit Transfer(msg.sender, to, value);
        return true;
    }
}
